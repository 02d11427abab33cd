package upstream

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzValid: Valid agrees with encoding/json's Valid on every input.
func FuzzValid(f *testing.F) {
	for _, s := range []string{`{}`, `[]`, `""`, `0`, `-0.5e+10`, `01`, `1.`, `-`, `1e`, `"\u00zz"`, `"\u00e9"`, "\"\x01\"",
		`{"a":[1,{"b":null}],"c":"x\"y"}`, `{"a" 1}`, `{"a":1,}`, `[1,]`, ` true `, `tru`, `nul`, `falsey`, `{"a":"\`,
		"\"\xff\"", `[` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `]`, strings.Repeat("[", 10000) + strings.Repeat("]", 10000)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Valid(b), json.Valid(b); got != want {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", b, got, want)
		}
	})
}

func BenchmarkValid(b *testing.B) {
	frame := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hello \u00e9 world"},"finish_reason":null}]}`)
	for _, c := range []struct {
		name  string
		valid func([]byte) bool
	}{{"upstream", Valid}, {"encoding-json", json.Valid}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(frame)))
			for b.Loop() {
				if !c.valid(frame) {
					b.Fatal("invalid")
				}
			}
		})
	}
}
