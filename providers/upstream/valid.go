package upstream

// Valid reports whether b is one JSON value, exactly as encoding/json's Valid does (the fuzz
// test holds it to that, byte for byte), in one tight pass. The gateway checks every stream
// frame it relays and every request body it rewrites, so that a broken one never reaches a
// client or a backend; encoding/json's scanner, a function call per byte, made that check the
// largest part of what a relayed stream costs beyond a bare proxy (docs/benchmarks.md).
//
// Like encoding/json it does not check that strings are UTF-8, and it refuses values nested
// deeper than encoding/json's limit of 10,000.
func Valid(b []byte) bool { return Scan(b, nil) }

// Scan is Valid that also shows visit, when not nil, every object member once its value is
// checked: its depth (how many objects and arrays hold it, 1 for the members of a top-level
// object), where its key lies in b (b[m.Key:m.KeyEnd], as written between the quotes,
// escapes not decoded) and where its value does (b[m.At:m.End]). Members of one object come in document order, each after the members
// nested in its value. It lets a relay find the keys it looks for in the pass that checks
// the frame, instead of searching the bytes again for each. What visit saw of an invalid b
// means nothing. (Indexes rather than slices keep visit, and b, on the caller's stack.)
func Scan(b []byte, visit func(Member)) bool {
	v := validator{b: b, visit: visit}
	v.space()
	if !v.value(0) {
		return false
	}
	v.space()
	return v.i == len(b)
}

// maxDepth is encoding/json's nesting limit (maxNestingDepth in its scanner).
const maxDepth = 10000

type validator struct {
	b     []byte
	i     int
	visit func(Member)
	// escaped: the last string checked held an escape (str sets it, key reads it).
	escaped bool
}

// Member is one object member Scan saw: see Scan. Escaped: its key holds an escape, so it
// may spell a name its bytes do not.
type Member struct {
	Depth, Key, KeyEnd, At, End int
	Escaped                     bool
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
		return v.str()
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
	for {
		m := Member{Depth: depth}
		if object && !v.key(&m) {
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

// key checks a member's key and its colon at v.i, noting the key's place in m, and moves to
// its value.
func (v *validator) key(m *Member) bool {
	m.Key = v.i + 1
	v.escaped = false
	if v.i >= len(v.b) || v.b[v.i] != '"' || !v.str() {
		return false
	}
	m.KeyEnd, m.Escaped = v.i-1, v.escaped // the closing quote
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
func plainRun(b []byte, i int) int {
	t := &plain
	for i < len(b) && t[b[i]] {
		i++
	}
	return i
}

// str checks the string whose opening quote is at v.i, and notes in v.escaped whether it
// holds an escape.
func (v *validator) str() bool {
	for v.i++; v.i < len(v.b); v.i++ {
		i := plainRun(v.b, v.i)
		if v.i = i; i >= len(v.b) {
			return false
		}
		switch c := v.b[i]; {
		case c == '"':
			v.i++
			return true
		case c < 0x20:
			return false
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
