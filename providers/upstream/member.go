package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Relaying a client's body as it was sent, with only one member changed ("model" becomes the
// backend's own name), keeps every parameter the gateway does not model and the client's key
// order. SetMember does that on the bytes, without decoding the body into a map.

// member is the byte span of one top-level member's value in a JSON object.
type member struct {
	key        string
	start, end int
}

// members lists the top-level members of the JSON object obj.
func members(obj []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	var out []member
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("read key: %w", err)
		}
		key, _ := t.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("read %q: %w", key, err)
		}
		end := int(dec.InputOffset())
		out = append(out, member{key: key, start: end - len(raw), end: end})
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return nil, errors.New("unterminated JSON object")
	}
	if rest := bytes.TrimLeft(obj[dec.InputOffset():], " \t\r\n"); len(rest) > 0 { // JSON's whitespace only
		return nil, errors.New("data after the JSON object")
	}
	return out, nil
}

// SetMember returns a copy of obj with every value of key replaced by f(old value), or with
// key:f(nil) added when key is absent. Everything else is kept byte for byte.
func SetMember(obj []byte, key string, f func(old []byte) []byte) ([]byte, error) {
	ms, err := members(obj)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(obj)+64)
	last := 0
	found := false
	for _, m := range ms {
		if m.key != key {
			continue
		}
		found = true
		out = append(out, obj[last:m.start]...)
		out = append(out, f(obj[m.start:m.end])...)
		last = m.end
	}
	if found {
		return append(out, obj[last:]...), nil
	}
	// Absent: append it as the last member, where a person would have written it.
	end := bytes.LastIndexByte(obj, '}')
	k, _ := json.Marshal(key)
	out = append(out, obj[:end]...)
	if len(ms) > 0 {
		out = append(out, ',')
	}
	out = append(out, k...)
	out = append(out, ':')
	out = append(out, f(nil)...)
	return append(out, obj[end:]...), nil
}
