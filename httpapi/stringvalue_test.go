package httpapi

import (
	"encoding/json"
	"testing"
)

// FuzzStringValue holds stringValue to the json.Unmarshal into a string that it replaced in
// the Responses and Messages ingress, on every value a request's decoder could have filled a
// json.RawMessage with (valid JSON; white space around it only as a caller may have left it):
// the same text where that decode succeeds (a string, or null for ""), false where it fails.
func FuzzStringValue(f *testing.F) {
	for _, s := range []string{`"hi"`, `null`, ` null `, `"a\u00e9\ud83d"`, "\"\xff\"", `[]`, `["a"]`, `{}`, `1`, `true`, ` "x" `, `""`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return // never a decoder's RawMessage
		}
		var want string
		err := json.Unmarshal(raw, &want)
		got, ok := stringValue(raw)
		if ok != (err == nil) || got != want {
			t.Fatalf("stringValue(%q) = %q, %v; json.Unmarshal: %q, %v", raw, got, ok, want, err)
		}
	})
}
