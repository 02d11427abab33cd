package upstream

import (
	"encoding/json"
	"fmt"
	"slices"
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

// TestScanMembers: Scan shows each object member with its depth (the containers around it,
// arrays too), key and value, members of one object in document order, each after the
// members nested in its value; arrays' items are not members; an invalid document is refused.
func TestScanMembers(t *testing.T) {
	doc := `{"a":1, "b" : {"c":[{"d":"x"}],"e\"f":null},"g":[1,2]}`
	var got []string
	ok := Scan([]byte(doc), func(m Member) {
		got = append(got, fmt.Sprintf("%d %s=%s esc=%v", m.Depth, doc[m.Key:m.KeyEnd], doc[m.At:m.End], m.Escaped))
	})
	want := []string{
		`1 a=1 esc=false`,
		`4 d="x" esc=false`,
		`2 c=[{"d":"x"}] esc=false`,
		`2 e\"f=null esc=true`,
		`1 b={"c":[{"d":"x"}],"e\"f":null} esc=false`,
		`1 g=[1,2] esc=false`,
	}
	if !ok || !slices.Equal(got, want) {
		t.Fatalf("Scan = %v:\n%s\nwant\n%s", ok, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if Scan([]byte(`{"a":1,}`), func(Member) {}) {
		t.Fatal("Scan took an invalid document")
	}
}
