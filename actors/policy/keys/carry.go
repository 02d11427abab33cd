package keys

// Carry makes r continue what old knew of the keys that stay across a reload: from[i] is
// the index in old of r's key i, or negative for a key that is new. A cooling key keeps its
// cooldown and the turn stays with the key it was on when that key stays; a key or pair set
// aside is not carried (SPEC §10: a reload restores it).
func (r *Ring) Carry(old *Ring, from []int) {
	for i, j := range from {
		if i >= len(r.until) || j < 0 || j >= len(old.until) {
			continue
		}
		r.until[i] = old.until[j]
		if j == old.next {
			r.next = i
		}
	}
}

// Clone returns a copy of r that shares nothing with it: a change to one never shows in the
// other.
func (r *Ring) Clone() *Ring {
	c := &Ring{}
	r.CopyTo(c)
	return c
}

// CopyTo makes dst a copy of r that shares nothing with it, reusing dst's storage. Its owner
// changes the copy and then swaps it in (*r, *dst = *dst, *r) to apply a change whole.
func (r *Ring) CopyTo(dst *Ring) {
	until, asides, pairs := dst.until[:0], dst.aside[:0], dst.pairs
	*dst = *r
	dst.until = append(until, r.until...)
	for _, a := range r.aside {
		asides = append(asides, a.clone())
	}
	dst.aside = asides
	if pairs == nil {
		pairs = make(map[pair]*aside, len(r.pairs))
	}
	clear(pairs)
	for p, a := range r.pairs {
		pairs[p] = a.clone()
	}
	dst.pairs = pairs
}

// clone copies a; nil stays nil.
func (a *aside) clone() *aside {
	if a == nil {
		return nil
	}
	c := *a
	return &c
}
