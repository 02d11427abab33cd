package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"unicode/utf8"
)

// Relaying a client's body as it was sent, with only one member changed ("model" becomes the
// backend's own name), keeps every parameter the gateway does not model and the client's key
// order. SetMember does that on the bytes, without decoding the body into a map.

// member is one top-level member of a JSON object: the byte spans of its key (quotes
// included) and of its value.
type member struct {
	keyStart, keyEnd int
	start, end       int
}

// is reports whether m's key, in obj, is key. A key without escapes is compared as it is
// written; one with escapes, or with bytes that are not UTF-8 (which decode to U+FFFD), is
// decoded first.
func (m member) is(obj []byte, key string) bool {
	raw := obj[m.keyStart:m.keyEnd]
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw[1:len(raw)-1]) == key
	}
	var k string
	return json.Unmarshal(raw, &k) == nil && k == key
}

// members lists the top-level members of the JSON object obj, in the one pass that checks obj
// is JSON (Scan), without allocating more than the list (a json.Decoder's tokens cost dozens
// of allocations per request body, on every call the gateway relays; a separate walk after
// the check read a coding agent's request body twice).
func members(obj []byte) ([]member, error) {
	out := make([]member, 0, 8)
	valid := Scan(obj, func(m Member) {
		if m.Depth == 1 {
			out = append(out, member{keyStart: m.Key - 1, keyEnd: m.KeyEnd + 1, start: m.At, end: m.End})
		}
	})
	if !valid {
		var v json.RawMessage
		if err := json.Unmarshal(obj, &v); err != nil {
			return nil, err // says what is wrong and where
		}
		return nil, errors.New("not valid JSON")
	}
	if obj[skipSpace(obj, 0)] != '{' {
		return nil, errors.New("not a JSON object")
	}
	return out, nil
}

// The walkers below take valid JSON and an index into it.

// skipSpace is the index of the first byte at or after i that is not JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// stringEnd is the index just past the string whose opening quote is at i.
func stringEnd(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++ // the escaped byte, a quote among them
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// ValueEnd is the index just past the JSON value that starts at b[i], in a b that Valid takes.
func ValueEnd(b []byte, i int) int { return valueEnd(b, i) }

// SkipSpace is the index of the first byte at or after b[i] that is not JSON whitespace.
func SkipSpace(b []byte, i int) int { return skipSpace(b, i) }

// valueEnd is the index just past the value that starts at i.
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = stringEnd(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	}
	for ; i < len(b); i++ { // a number, true, false or null: up to the next delimiter
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return i
		}
	}
	return i
}

// SetMember returns a copy of obj with every value of key replaced by f(old value), or with
// key:f(nil) added when key is absent. Everything else is kept byte for byte.
func SetMember(obj []byte, key string, f func(old []byte) []byte) ([]byte, error) {
	return SetMembers(obj, Edit{Key: key, Value: f})
}

// Edit is one change SetMembers makes: every value of Key replaced by Value(old value), or
// Key:Value(nil) added when Key is absent.
type Edit struct {
	Key   string
	Value func(old []byte) []byte
}

// SetMembers is SetMember for several keys, each named once, in one pass: the object is
// checked, walked and copied once however many members change (a coding agent's request body
// is hundreds of KB, and each pass reads all of it). Absent keys are added last, in the
// edits' order, as SetMember one key after the other would.
func SetMembers(obj []byte, edits ...Edit) ([]byte, error) {
	ms, err := members(obj)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(obj)+64)
	last := 0
	found := make([]bool, len(edits))
	for _, m := range ms {
		for e, ed := range edits {
			if !m.is(obj, ed.Key) {
				continue
			}
			found[e] = true
			out = append(out, obj[last:m.start]...)
			out = append(out, ed.Value(obj[m.start:m.end])...)
			last = m.end
			break
		}
	}
	n := len(ms)
	for e, ed := range edits {
		if found[e] {
			continue
		}
		// Absent: append it as the last member, where a person would have written it.
		end := bytes.LastIndexByte(obj, '}')
		out = append(out, obj[last:end]...)
		if n > 0 {
			out = append(out, ',')
		}
		k, _ := json.Marshal(ed.Key)
		out = append(out, k...)
		out = append(out, ':')
		out = append(out, ed.Value(nil)...)
		last, n = end, n+1
	}
	return append(out, obj[last:]...), nil
}
