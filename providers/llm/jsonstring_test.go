package llm

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestStringValue(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want string
		ok   bool
	}{
		{`"hello there"`, "hello there", true},
		{`""`, "", true},
		{`"日本語"`, "日本語", true},
		{`"a\nb\t\"c\"\\\/\b\f\r"`, "a\nb\t\"c\"\\/\b\f\r", true},
		{`"\u00e9\u00E9"`, "éé", true},
		{`"\ud83d\ude00!"`, "😀!", true},           // a surrogate pair
		{`"\ud83d!"`, "\ufffd!", true},            // half of one: replaced, as encoding/json does
		{`"\ude00\ud83d\ude00"`, "\ufffd😀", true}, // a low half first, then a pair
		{`"\ud83d\u0041"`, "\ufffdA", true},       // a high half before no low one
		{"\"\xff\"", "\ufffd", true},              // not UTF-8: likewise
		{"\"a\\n\xe2\x82\"", "a\n\ufffd\ufffd", true},
		{"\"\xff\xfe\"", "\ufffd\ufffd", true},
		{"\"a\tb\"", "", false}, // a control character: not JSON
		{`"a"b"`, "", false},    // not one string
		{`"a\"`, "", false},     // the closing quote escaped
		{`"\x41"`, "", false},   // not a JSON escape
		{`"\u12"`, "", false},   // too few digits
		{`"\u12G4"`, "", false}, // not hex
		{`"`, "", false},        // not a string at all
		{`hello`, "", false},    // likewise
		{` "a"`, "", false},     // a literal, not a document: no space around it
	} {
		got, ok := StringValue([]byte(tt.in))
		if got != tt.want || ok != tt.ok {
			t.Errorf("StringValue(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

// FuzzStringValue holds StringValue to encoding/json: the same text for every literal it
// decodes, false for everything that is not one literal.
func FuzzStringValue(f *testing.F) {
	for _, s := range []string{`"hi"`, `"a\nb"`, `"é"`, "\"\xff\"", `"a\/b"`, `"\ud83d\ude00"`, `"\ud83d"`,
		`"\ud83d\ud83d\ude00"`, `"\u00e9\t\"q\""`, `""`, `"a\"`, `"\u00"`, "\"\x7f\"", `"a" `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := StringValue(data)
		var want string
		err := json.Unmarshal(data, &want)
		isLiteral := err == nil && len(data) > 0 && data[0] == '"' && strings.HasSuffix(string(data), `"`)
		switch {
		case ok != isLiteral:
			t.Fatalf("StringValue(%q) ok = %v; encoding/json: %q, %v", data, ok, want, err)
		case ok && got != want:
			t.Fatalf("StringValue(%q) = %q; encoding/json: %q", data, got, want)
		}
	})
}

// BenchmarkStringValue decodes a file's worth of source code, where an escape comes every
// few bytes, and of prose, where one comes at the end of a paragraph.
func BenchmarkStringValue(b *testing.B) {
	for _, bc := range []struct{ name, text string }{
		{"code", strings.Repeat("func main() {\n\tfmt.Println(\"hello, world\")\n}\n", 100)},
		{"prose", strings.Repeat("A gateway admits a call when its lanes are free, and queues it otherwise.\n", 70)},
	} {
		lit, _ := json.Marshal(bc.text)
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(lit)))
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := StringValue(lit); !ok {
					b.Fatal("not decoded")
				}
			}
		})
	}
}
