package keys

import "slices"

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
// other. Its owner changes a clone and assigns it back (*r = *clone) to apply a change whole.
func (r *Ring) Clone() *Ring {
	c := *r
	c.until = slices.Clone(r.until)
	c.aside = make([]*aside, len(r.aside))
	for i, a := range r.aside {
		c.aside[i] = a.clone()
	}
	c.pairs = make(map[pair]*aside, len(r.pairs))
	for p, a := range r.pairs {
		c.pairs[p] = a.clone()
	}
	return &c
}

// clone copies a; nil stays nil.
func (a *aside) clone() *aside {
	if a == nil {
		return nil
	}
	c := *a
	return &c
}
