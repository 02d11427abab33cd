// Package wirejsontest holds what the tests of wirejson and of its users share to hold the
// exact-name JSON they read to encoding/json's: which inputs the two may read apart.
package wirejsontest

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// NameFacts reads b, JSON that encoding/json takes, with encoding/json's token decoder: dup,
// some object names a member twice (names decoded); folded, some name is one encoding/json v1
// could match to a field spelled otherwise (it has an upper-case letter, or a byte beyond
// ASCII, which Unicode's folding may take for a letter). On JSON with neither, v1 and the
// exact names wirejson reads agree.
func NameFacts(b []byte) (dup, folded bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	type level struct {
		names      map[string]bool // nil: an array
		expectName bool
	}
	var stack []*level
	valueDone := func() {
		if n := len(stack); n > 0 && stack[n-1].names != nil {
			stack[n-1].expectName = true
		}
	}
	for {
		t, err := dec.Token()
		if err != nil {
			return dup, folded
		}
		top := (*level)(nil)
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch t := t.(type) {
		case json.Delim:
			switch t {
			case '{':
				stack = append(stack, &level{names: map[string]bool{}, expectName: true})
			case '[':
				stack = append(stack, &level{})
			default:
				stack = stack[:len(stack)-1]
				valueDone()
			}
			continue
		case string:
			if top != nil && top.names != nil && top.expectName {
				dup = dup || top.names[t]
				top.names[t] = true
				folded = folded || strings.ToLower(t) != t || strings.IndexFunc(t, func(r rune) bool { return r >= utf8.RuneSelf }) >= 0
				top.expectName = false
				continue
			}
		}
		valueDone()
	}
}
