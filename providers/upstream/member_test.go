package upstream

import (
	"bytes"
	"encoding/json"
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

func compact(b []byte) []byte {
	var out bytes.Buffer
	if json.Compact(&out, b) != nil {
		return b
	}
	return out.Bytes()
}
