package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

// FuzzSetMember: replacing a member of any JSON object keeps it a valid JSON object whose
// member has the new value and whose other members are unchanged.
func FuzzSetMember(f *testing.F) {
	f.Add([]byte(`{"model":"a","messages":[]}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(` { "x" : {"model":1} , "model" : null, "model": 2 } `))
	f.Add([]byte(`{"stream_options":{"include_usage":false}}`))
	f.Fuzz(func(t *testing.T, obj []byte) {
		out, err := SetMember(obj, "model", func([]byte) []byte { return []byte(`"m"`) })
		var before map[string]json.RawMessage
		validObj := json.Unmarshal(obj, &before) == nil && bytes.HasPrefix(bytes.TrimSpace(obj), []byte("{"))
		if err != nil {
			if validObj {
				t.Fatalf("SetMember(%q) failed on a valid object: %v", obj, err)
			}
			return
		}
		var after map[string]json.RawMessage
		if err := json.Unmarshal(out, &after); err != nil {
			t.Fatalf("SetMember(%q) = %q: %v", obj, out, err)
		}
		if string(after["model"]) != `"m"` {
			t.Fatalf("model = %s in %q", after["model"], out)
		}
		for k, v := range before {
			if k != "model" && !bytes.Equal(compact(v), compact(after[k])) {
				t.Fatalf("member %q changed: %s -> %s", k, v, after[k])
			}
		}
	})
}

// FuzzSetMembers: changing two members in one pass gives the bytes that changing them one after
// the other does, and fails where that fails.
func FuzzSetMembers(f *testing.F) {
	f.Add([]byte(`{"model":"a","messages":[],"stream":true}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(` { "stream_options" : {"include_usage":false} , "model" : null, "model": 2 } `))
	f.Add([]byte(`{"x":1}`))
	f.Fuzz(func(t *testing.T, obj []byte) {
		model := func([]byte) []byte { return []byte(`"m"`) }
		opts := func(old []byte) []byte {
			if old == nil {
				return []byte(`{"was":null}`)
			}
			return append(append([]byte(`{"was":`), old...), '}')
		}
		one, err1 := SetMembers(obj, Edit{Key: "model", Value: model}, Edit{Key: "stream_options", Value: opts})
		two, err2 := SetMember(obj, "model", model)
		if err2 == nil {
			two, err2 = SetMember(two, "stream_options", opts)
		}
		if (err1 == nil) != (err2 == nil) || !bytes.Equal(one, two) {
			t.Fatalf("SetMembers(%q) = %q, %v; one after the other: %q, %v", obj, one, err1, two, err2)
		}
	})
}

func compact(b []byte) []byte {
	var out bytes.Buffer
	if json.Compact(&out, b) != nil {
		return b
	}
	return out.Bytes()
}

// FuzzMembers: the walk over a checked object finds the same members, at the same spans, as
// a json.Decoder reading it token by token, and refuses what the decoder refuses.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{`{"model":"a","messages":[{"x":"}]\"{"}],"n":-1.5e3,"t":true}`, `{}`, ` {"a\u0062":null , "c" : [ ] } `,
		`{"a":1}x`, `[1]`, `{"a":"\\"}`, "{\"a\":1}\v", `{"a":{"b":[1,{"c":"]"}]}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, obj []byte) {
		got, err := members(obj)
		want, werr := decodedMembers(obj)
		if (err == nil) != (werr == nil) {
			t.Fatalf("members(%q): err %v, the decoder's %v", obj, err, werr)
		}
		if len(got) != len(want) {
			t.Fatalf("members(%q) = %d members, the decoder found %d", obj, len(got), len(want))
		}
		for i, m := range got {
			if string(m.Name) != want[i].key || m.At != want[i].start || m.End != want[i].end {
				t.Fatalf("members(%q)[%d] = key %q value %q, the decoder's %q %q", obj, i,
					m.Name, obj[m.At:m.End], want[i].key, obj[want[i].start:want[i].end])
			}
		}
	})
}

type decodedMember struct {
	key        string
	start, end int
}

// decodedMembers is the reference for members: the object read with a json.Decoder.
func decodedMembers(obj []byte) ([]decodedMember, error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	var out []decodedMember
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		end := int(dec.InputOffset())
		out = append(out, decodedMember{key: t.(string), start: end - len(raw), end: end})
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return nil, errors.New("unterminated JSON object")
	}
	if rest := bytes.TrimLeft(obj[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return nil, errors.New("data after the JSON object")
	}
	return out, nil
}
