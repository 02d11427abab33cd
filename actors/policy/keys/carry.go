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
