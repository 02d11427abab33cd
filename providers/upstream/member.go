package upstream

import (
	"bytes"
	"encoding/json"

	"github.com/tollgate/tollgate/providers/wirejson"
)

// Relaying a client's body as it was sent, with only one member changed ("model" becomes the
// backend's own name), keeps every parameter the gateway does not model and the client's key
// order. SetMember does that on the bytes, without decoding the body into a map.

// members lists the top-level members of the JSON object obj in the pass that checks it
// (wirejson.Members: a client's body, read as encoding/json reads it).
func members(obj []byte) ([]wirejson.Member, error) { return wirejson.Members(obj) }

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
			if string(m.Name) != ed.Key {
				continue
			}
			found[e] = true
			out = append(out, obj[last:m.At]...)
			out = append(out, ed.Value(obj[m.At:m.End])...)
			last = m.End
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
