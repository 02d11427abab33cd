package wirejson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/providers/wirejson/wirejsontest"
)

// FuzzValid holds Valid, Check and Scan to encoding/json's Valid on every input, less the JSON
// in which an object names a member twice (names decoded), which they refuse.
func FuzzValid(f *testing.F) {
	for _, s := range []string{`{}`, `[]`, `""`, `0`, `-0.5e+10`, `01`, `1.`, `-`, `1e`, `"\u00zz"`, `"\u00e9"`, "\"\x01\"",
		`{"a":[1,{"b":null}],"c":"x\"y"}`, `{"a" 1}`, `{"a":1,}`, `[1,]`, ` true `, `tru`, `nul`, `falsey`, `{"a":"\`,
		"\"\xff\"",
		`{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"a":{"b":1},"b":{"b":2}}`, `[{"a":1},{"a":1}]`, `{"A":1,"a":2}`, `1 2`, ``, ` `,
		`{"\ud800":1,"\udfff":2}`, "{\"\xff\":1,\"\xfe\":2}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		dup, _ := wirejsontest.NameFacts(b)
		want := json.Valid(b) && !dup
		scanned := Scan(b, func(Member) {})
		if got, err := Valid(b), Check(b); got != want || (err == nil) != want || scanned != want {
			t.Fatalf("Valid(%q) = %v, Check %v, Scan %v; encoding/json says %v, a name twice %v", b, got, err, scanned, json.Valid(b), dup)
		}
	})
}

// TestDepthLimit: JSON nested 10,000 deep is valid, one level more is not, as encoding/json
// decides. (Kept out of FuzzValid's seeds: mutations of 20 KB inputs slowed the fuzzer a
// hundredfold.)
func TestDepthLimit(t *testing.T) {
	for _, b := range [][]byte{
		[]byte(strings.Repeat("[", 10000) + strings.Repeat("]", 10000)),
		[]byte(`[` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `]`),
		[]byte(strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000)),
		[]byte(strings.Repeat(`{"a":`, 10001) + "1" + strings.Repeat("}", 10001)),
	} {
		if got, want := Valid(b), json.Valid(b); got != want || Scan(b, func(Member) {}) != want {
			t.Errorf("Valid of %d bytes nested = %v, encoding/json says %v", len(b), got, want)
		}
	}
}

// TestScanMembers: Scan shows each object member with its depth (the containers around it,
// arrays too), decoded name and value, members of one object in document order, each after
// the members nested in its value; arrays' items are not members; an invalid document, or one
// naming a member twice, is refused.
func TestScanMembers(t *testing.T) {
	doc := `{"a":1, "b" : {"c":[{"d":"x"}],"e\"f":null},"g":[1,2]}`
	var got []string
	ok := Scan([]byte(doc), func(m Member) {
		got = append(got, fmt.Sprintf("%d %s=%s", m.Depth, m.Name, doc[m.At:m.End]))
	})
	want := []string{
		`1 a=1`,
		`4 d="x"`,
		`2 c=[{"d":"x"}]`,
		`2 e"f=null`,
		`1 b={"c":[{"d":"x"}],"e\"f":null}`,
		`1 g=[1,2]`,
	}
	if !ok || !slices.Equal(got, want) {
		t.Fatalf("Scan = %v:\n%s\nwant\n%s", ok, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, bad := range []string{`{"a":1,}`, `{"a":1,"a":1}`, `{"a":1,"\u0061":1}`, `{"x":[{"b":1,"b":2}]}`} {
		if Scan([]byte(bad), func(Member) {}) {
			t.Errorf("Scan took %s", bad)
		}
	}
	if !Scan([]byte(`{"a":1,"A":1,"x":{"a":1}}`), func(Member) {}) {
		t.Error("Scan refused names that differ in case, or one name in two objects")
	}
}

// TestMembers: a client's body may name a member twice (encoding/json v1 takes it), and
// Members lists both; a body that is not an object is refused.
func TestMembers(t *testing.T) {
	ms, err := Members([]byte(` {"model":"a", "m\u006fdel" : 2}`))
	if err != nil || len(ms) != 2 || string(ms[0].Name) != "model" || string(ms[1].Name) != "model" {
		t.Fatalf("Members = %+v, %v", ms, err)
	}
	for _, bad := range []string{`[1]`, `"x"`, `{"a":}`, `{}x`, ``} {
		if _, err := Members([]byte(bad)); err == nil {
			t.Errorf("Members(%q) took it", bad)
		}
	}
}

func TestString(t *testing.T) {
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
		{`"a" `, "", false},
	} {
		got, ok := String([]byte(tt.in))
		if got != tt.want || ok != tt.ok {
			t.Errorf("String(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

// FuzzString holds String to encoding/json: the same text for every literal it decodes,
// false for everything that is not one literal.
func FuzzString(f *testing.F) {
	for _, s := range []string{`"hi"`, `"a\nb"`, `"é"`, "\"\xff\"", `"a\/b"`, `"\ud83d\ude00"`, `"\ud83d"`,
		`"\ud83d\ud83d\ude00"`, `"\u00e9\t\"q\""`, `""`, `"a\"`, `"\u00"`, "\"\x7f\"", `"a" `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := String(data)
		var want string
		err := json.Unmarshal(data, &want)
		isLiteral := err == nil && len(data) > 0 && data[0] == '"' && strings.HasSuffix(string(data), `"`)
		switch {
		case ok != isLiteral:
			t.Fatalf("String(%q) ok = %v; encoding/json: %q, %v", data, ok, want, err)
		case ok && got != want:
			t.Fatalf("String(%q) = %q; encoding/json: %q", data, got, want)
		}
	})
}

// FuzzCut holds Cut to encoding/json's decoder: a value that stops before its end is one the
// decoder reads to io.ErrUnexpectedEOF.
func FuzzCut(f *testing.F) {
	for _, s := range []string{`{"a":`, `{"a":1}`, `[1,2`, `{"a":"x`, `{"a":1}}`, `{"a" 1`, `"abc`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var v json.RawMessage
		err := json.NewDecoder(bytes.NewReader(b)).Decode(&v)
		want := err != nil && err.Error() == "unexpected EOF"
		if got := Cut(b); got != want {
			t.Fatalf("Cut(%q) = %v; encoding/json's decoder: %v", b, got, err)
		}
	})
}

// BenchmarkScan reads a stream frame as the relay does.
func BenchmarkScan(b *testing.B) {
	frame := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hello \u00e9 world"},"finish_reason":null}]}`)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if !Scan(frame, func(Member) {}) {
			b.Fatal("invalid")
		}
	}
}

// BenchmarkValid checks the frame BenchmarkScan reads.
func BenchmarkValid(b *testing.B) {
	frame := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hello \u00e9 world"},"finish_reason":null}]}`)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if !Valid(frame) {
			b.Fatal("invalid")
		}
	}
}

// BenchmarkString decodes a file's worth of source code, where an escape comes every few
// bytes, and of prose, where one comes at the end of a paragraph.
func BenchmarkString(b *testing.B) {
	for _, bc := range []struct{ name, text string }{
		{"code", strings.Repeat("func main() {\n\tfmt.Println(\"hello, world\")\n}\n", 100)},
		{"prose", strings.Repeat("A gateway admits a call when its lanes are free, and queues it otherwise.\n", 70)},
	} {
		lit, _ := json.Marshal(bc.text)
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(lit)))
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := String(lit); !ok {
					b.Fatal("not decoded")
				}
			}
		})
	}
}

// TestDuplicateNamesInLargeObjects: past maxLinear names an object's duplicates are still
// found (in a map), the name given twice early, late, or escaped; and an object nested in a
// large one keeps its own names.
func TestDuplicateNamesInLargeObjects(t *testing.T) {
	var members []string
	for i := range 40 {
		members = append(members, fmt.Sprintf(`"k%d":%d`, i, i))
	}
	obj := func(extra ...string) []byte {
		return []byte("{" + strings.Join(append(slices.Clone(members), extra...), ",") + "}")
	}
	for _, tt := range []struct {
		name string
		doc  []byte
		want bool
	}{
		{"distinct", obj(), true},
		{"the third again, last", obj(`"k2":0`), false},
		{"the last again", obj(`"k39":0`), false},
		{"escaped", obj(`"k\u0031":0`), false},
		{"a nested object's names are its own", obj(`"n":{"k1":1,"k2":2}`), true},
		{"twice in the nested one", obj(`"n":{"k1":1,"k1":2}`), false},
	} {
		if got := Valid(tt.doc); got != tt.want {
			t.Errorf("%s: Valid = %v, want %v", tt.name, got, tt.want)
		}
	}
}
