package wirejson

import (
	"bytes"
	"sync"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// The validator is the gateway's own pass over JSON: every stream frame it relays and every
// request body it rewrites is checked so, and the members it shows are how the relay finds
// the names it acts on without a second pass. jsontext's decoder, which Unmarshal uses, costs
// several times as much per frame (docs/benchmarks.md, "One JSON seam"), so the hot check is
// this one and everything that decodes goes to encoding/json/v2.
//
// Like encoding/json it does not check that strings are UTF-8, and it refuses values nested
// deeper than encoding/json's limit of 10,000.

// scan reports whether b is one JSON value and, when visit is not nil, shows it every object
// member once its value is checked (see Scan). With dups false an object that names a member
// twice (names compared decoded) is refused.
func scan(b []byte, visit func(Member), dups bool) bool {
	v := validator{b: b, visit: visit, dups: dups}
	if !dups {
		names := namePool.Get().(*[][]byte)
		v.names = (*names)[:0]
		defer func() {
			if cap(v.names) > maxPooled {
				return // an odd object's list: not worth keeping
			}
			clear(v.names[:cap(v.names)]) // keep no input alive
			*names = v.names[:0]
			namePool.Put(names)
		}()
	}
	v.space()
	if !v.value(0) {
		return false
	}
	v.space()
	return v.i == len(b)
}

// namePool keeps the validators' lists of names for reuse: a list on scan's stack would
// escape, and cost an allocation per frame.
var namePool = sync.Pool{New: func() any { s := make([][]byte, 0, 32); return &s }}

// maxPooled is the longest list of names namePool keeps.
const maxPooled = 1024

// maxDepth is encoding/json's nesting limit (maxNestingDepth in its scanner).
const maxDepth = 10000

// maxLinear is how many names an object may have before its duplicates are looked for in a
// map rather than by comparing each name with those before it.
const maxLinear = 16

type validator struct {
	b     []byte
	i     int
	visit func(Member)
	// escaped: the last string checked held an escape, or, for a key, a byte beyond ASCII
	// (str sets it, key reads it).
	escaped bool
	// dups: an object may name a member twice; else names holds the names of the members
	// of the open objects seen so far, innermost object's last.
	dups  bool
	names [][]byte
}

func (v *validator) space() {
	// Inlined: between tokens there is usually no whitespace at all.
	if v.i < len(v.b) && v.b[v.i] > ' ' {
		return
	}
	v.spaces()
}

// spaces is space's loop, kept out of line so that space itself stays small enough to inline.
//
//go:noinline
func (v *validator) spaces() {
	b, i := v.b, v.i
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	v.i = i
}

// value checks the value at v.i, depth levels down, and moves past it.
func (v *validator) value(depth int) bool {
	if v.i >= len(v.b) {
		return false
	}
	switch c := v.b[v.i]; {
	case c == '{':
		return v.container(depth+1, true)
	case c == '[':
		return v.container(depth+1, false)
	case c == '"':
		return v.str(&plain)
	case c == '-' || c >= '0' && c <= '9':
		return v.number()
	case c == 't':
		return v.word("true")
	case c == 'f':
		return v.word("false")
	case c == 'n':
		return v.word("null")
	}
	return false
}

// container checks the object ({ members }) or array ([ values ]) opening at v.i, depth
// levels down: its items separated by commas up to its closing byte.
func (v *validator) container(depth int, object bool) bool {
	if depth > maxDepth {
		return false
	}
	first := len(v.names) // this object's names start here
	ok := v.items(depth, object)
	v.names = v.names[:first]
	return ok
}

// items checks a container's items, from its opening byte at v.i to its closing one.
func (v *validator) items(depth int, object bool) bool {
	closing := byte(']')
	if object {
		closing = '}'
	}
	v.i++ // '{' or '['
	v.space()
	if v.i < len(v.b) && v.b[v.i] == closing {
		v.i++
		return true
	}
	var seen map[string]struct{} // the names, once there are more than maxLinear
	first := len(v.names)
	for {
		m := Member{Depth: depth}
		if object && (!v.key(&m) || !v.dups && !v.once(m.Name, first, &seen)) {
			return false
		}
		m.At = v.i
		if !v.value(depth) {
			return false
		}
		if object && v.visit != nil {
			m.End = v.i
			v.visit(m)
		}
		v.space()
		if v.i >= len(v.b) {
			return false
		}
		switch v.b[v.i] {
		case ',':
			v.i++
			v.space()
		case closing:
			v.i++
			return true
		default:
			return false
		}
	}
}

// once reports whether name is not among the names of the object whose names start at
// v.names[first], and adds it.
func (v *validator) once(name []byte, first int, seen *map[string]struct{}) bool {
	if *seen != nil {
		if _, twice := (*seen)[string(name)]; twice {
			return false
		}
		(*seen)[string(name)] = struct{}{}
		return true
	}
	for _, n := range v.names[first:] {
		if string(n) == string(name) {
			return false
		}
	}
	if v.names = append(v.names, name); len(v.names)-first > maxLinear {
		*seen = make(map[string]struct{}, 2*maxLinear)
		for _, n := range v.names[first:] {
			(*seen)[string(n)] = struct{}{}
		}
	}
	return true
}

// key checks a member's key and its colon at v.i, noting the member's name in m, and moves
// to its value.
func (v *validator) key(m *Member) bool {
	start := v.i
	v.escaped = false
	if v.i >= len(v.b) || v.b[v.i] != '"' || !v.str(&plainKey) {
		return false
	}
	m.Name = v.b[start+1 : v.i-1]
	if v.escaped && (bytes.IndexByte(m.Name, '\\') >= 0 || !utf8.Valid(m.Name)) {
		// An escape, or a byte that is not UTF-8 (U+FFFD once decoded): the name is its
		// decoded text, as every decoder compares it.
		m.Name, _ = jsontext.AppendUnquote(nil, v.b[start:v.i])
	}
	v.space()
	if v.i >= len(v.b) || v.b[v.i] != ':' {
		return false
	}
	v.i++
	v.space()
	return true
}

// plain marks the bytes a string holds as they are: not its quote, not a backslash, not a
// control character.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// plainRun returns the index of the first byte at or after i that is not plain. (Word-at-a-
// time tests did worse: most strings in a stream frame are shorter than two words. So did
// one loop with its own stack in place of these functions per grammar rule.)
func plainRun(b []byte, i int, t *[256]bool) int {
	for i < len(b) && t[b[i]] {
		i++
	}
	return i
}

// plainKey is plain for a key: a byte beyond ASCII ends a run too, so that the key's check
// notes it.
var plainKey = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = plain[c]
	}
	return t
}()

// str checks the string whose opening quote is at v.i, runs of plain bytes by the table t,
// and notes in v.escaped whether it holds an escape or a byte t does not take for plain.
func (v *validator) str(t *[256]bool) bool {
	for v.i++; v.i < len(v.b); v.i++ {
		i := plainRun(v.b, v.i, t)
		if v.i = i; i >= len(v.b) {
			return false
		}
		switch c := v.b[i]; {
		case c == '"':
			v.i++
			return true
		case c < 0x20:
			return false
		case c >= utf8.RuneSelf:
			v.escaped = true // a byte beyond ASCII in a key
		case c == '\\':
			v.escaped = true
			v.i++
			if v.i >= len(v.b) {
				return false
			}
			switch v.b[v.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if v.i+4 >= len(v.b) {
					return false
				}
				for _, h := range v.b[v.i+1 : v.i+5] {
					if !isHex(h) {
						return false
					}
				}
				v.i += 4
			default:
				return false
			}
		}
	}
	return false
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// number checks -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? at v.i.
func (v *validator) number() bool {
	if v.b[v.i] == '-' {
		v.i++
	}
	switch {
	case v.i >= len(v.b):
		return false
	case v.b[v.i] == '0':
		v.i++
	case v.b[v.i] >= '1' && v.b[v.i] <= '9':
		v.digits()
	default:
		return false
	}
	if v.i < len(v.b) && v.b[v.i] == '.' {
		v.i++
		if !v.digits() {
			return false
		}
	}
	if v.i < len(v.b) && (v.b[v.i] == 'e' || v.b[v.i] == 'E') {
		v.i++
		if v.i < len(v.b) && (v.b[v.i] == '+' || v.b[v.i] == '-') {
			v.i++
		}
		if !v.digits() {
			return false
		}
	}
	return true
}

// digits moves past one or more digits, reporting whether there was one.
func (v *validator) digits() bool {
	start := v.i
	for v.i < len(v.b) && v.b[v.i] >= '0' && v.b[v.i] <= '9' {
		v.i++
	}
	return v.i > start
}

func (v *validator) word(w string) bool {
	if len(v.b)-v.i < len(w) || string(v.b[v.i:v.i+len(w)]) != w {
		return false
	}
	v.i += len(w)
	return true
}
