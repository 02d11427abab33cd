package llm

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestContentJSON(t *testing.T) {
	cases := []struct {
		in, text, out string
		parts         int
		bad           bool
	}{
		{in: `"hi"`, text: "hi", out: `"hi"`},
		{in: `null`, text: "", out: `""`},
		{in: `[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"data:,"}},{"type":"text","text":"b"}]`,
			text: "ab", parts: 3, out: `[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"data:,"}},{"type":"text","text":"b"}]`},
		{in: `[]`, text: "", out: `[]`},
		{in: `5`, bad: true},
		{in: `{"type":"text"}`, bad: true},
	}
	for _, tc := range cases {
		var c Content
		err := json.Unmarshal([]byte(tc.in), &c)
		if tc.bad {
			if err == nil {
				t.Errorf("%s: accepted", tc.in)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if c.PlainText() != tc.text || len(c.Parts) != tc.parts {
			t.Errorf("%s: text %q parts %d", tc.in, c.PlainText(), len(c.Parts))
		}
		out, _ := json.Marshal(c)
		if string(out) != tc.out {
			t.Errorf("%s: re-encoded as %s, want %s", tc.in, out, tc.out)
		}
	}
}

func TestStopJSON(t *testing.T) {
	for in, want := range map[string]int{`"x"`: 1, `["a","b"]`: 2, `null`: 0} {
		var s Stop
		if err := json.Unmarshal([]byte(in), &s); err != nil || len(s) != want {
			t.Errorf("%s: %v %v", in, s, err)
		}
	}
	var s Stop
	if err := json.Unmarshal([]byte(`7`), &s); err == nil {
		t.Error("a number was accepted as stop")
	}
}

func TestRequestHelpers(t *testing.T) {
	seven, nine := 7, 9
	r := Request{MaxTokens: &seven}
	if r.OutputLimit() != 7 || r.WantsUsage() {
		t.Fatal(r.OutputLimit(), r.WantsUsage())
	}
	r.MaxCompletionTokens = &nine
	r.StreamOptions = &StreamOptions{IncludeUsage: true}
	if r.OutputLimit() != 9 || !r.WantsUsage() {
		t.Fatal(r.OutputLimit(), r.WantsUsage())
	}
}

func TestPriority(t *testing.T) {
	for s, want := range map[string]Priority{"": Interactive, "interactive": Interactive, "normal": Normal, "background": Background} {
		if p, err := ParsePriority(s); err != nil || p != want || (s != "" && p.String() != s) {
			t.Errorf("%q: %v %v", s, p, err)
		}
	}
	if _, err := ParsePriority("urgent"); err == nil {
		t.Error("unknown priority accepted")
	}
}

func TestErrorKinds(t *testing.T) {
	err := error(&Error{Kind: KindQueueFull, Provider: "p", Message: "full"})
	wrapped := errors.Join(errors.New("context"), err)
	if KindOf(wrapped) != KindQueueFull || KindOf(errors.New("x")) != KindUpstream {
		t.Fatal("KindOf")
	}
	for k := KindUpstream; k <= KindInvalidAPIKey; k++ {
		if k.String() == "" || k.String()[0] == 'K' {
			t.Errorf("kind %d has no SPEC code", int(k))
		}
	}
	if err.Error() != "provider_queue_full: p: full" {
		t.Errorf("message %q", err.Error())
	}
}

func FuzzContent(f *testing.F) {
	f.Add([]byte(`"hi"`))
	f.Add([]byte(`[{"type":"text","text":"a"}]`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c Content
		if json.Unmarshal(data, &c) != nil {
			return
		}
		out, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("decoded %q but cannot encode: %v", data, err)
		}
		var back Content
		if err := json.Unmarshal(out, &back); err != nil || back.PlainText() != c.PlainText() {
			t.Fatalf("round trip of %q lost text: %v", data, err)
		}
	})
}

func TestArgumentsObject(t *testing.T) {
	for in, want := range map[string]string{"": "{}", "  ": "{}", `{"a":1}`: `{"a":1}`, ` {"a":1} `: `{"a":1}`,
		`[1]`: "", `"x"`: "", `{"a":`: "", `7`: ""} {
		got, ok := FunctionCall{Arguments: in}.ArgumentsObject()
		if ok != (want != "") || string(got) != want {
			t.Errorf("%q: %s %v, want %q", in, got, ok, want)
		}
	}
}

func TestEstimatePromptTokens(t *testing.T) {
	img := Part{Type: "image_url", ImageURL: &ImageURL{URL: "data:image/png;base64,AAAA"}}
	tests := []struct {
		name string
		req  Request
		want int
	}{
		{"empty", Request{}, 0},
		{"one short message", Request{Messages: []Message{{Role: "user", Content: Content{Text: "hello world!"}}}}, 4 + 1 + 3},
		{"CJK counts characters", Request{Messages: []Message{{Role: "user", Content: Content{Text: "你好世界"}}}}, 4 + 1 + 4},
		{"image part", Request{Messages: []Message{{Role: "user", Content: Content{Parts: []Part{{Type: "text", Text: "look"}, img}}}}}, 4 + 1 + 1 + ImageTokens},
		{"tools count", Request{Tools: []Tool{{Type: "function", Function: ToolFunction{Name: "get", Parameters: []byte(`{"type":"object"}`)}}}}, 1 + 5},
	}
	for _, tt := range tests {
		if got := EstimatePromptTokens(&tt.req); got != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, got, tt.want)
		}
	}
	r := Request{Messages: []Message{{Role: "user", Content: Content{Text: "first"}}, {Role: "assistant", Content: Content{Text: "x"}},
		{Role: "user", Content: Content{Parts: []Part{{Type: "text", Text: "second"}, img}}}, {Role: "tool", Content: Content{Text: "t"}}}}
	if r.LastUserText() != "second" || !r.HasImages() || (&Request{}).HasImages() || (&Request{}).LastUserText() != "" {
		t.Errorf("LastUserText %q, HasImages %v", r.LastUserText(), r.HasImages())
	}
}

// FuzzContentString holds a string content's decoding to what encoding/json
// decodes.
func FuzzContentString(f *testing.F) {
	for _, s := range []string{`"hi"`, `"a\nb"`, `"é"`, "\"\xff\"", "\"a\\n\xffb\"", `"a\/b"`, `"\ud83d\ude00"`,
		`"\ud83d"`, `"\u00e9\t\"q\""`, `""`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var want string
		if json.Unmarshal(data, &want) != nil {
			return
		}
		var c Content
		if err := json.Unmarshal(data, &c); err != nil || c.Text != want || c.Parts != nil {
			t.Fatalf("content %q decoded to %q, %v; encoding/json: %q", data, c.Text, err, want)
		}
	})
}

func TestContentString(t *testing.T) {
	for in, want := range map[string]string{
		`"hello there"`:   "hello there",
		`""`:              "",
		`"日本語"`:           "日本語",
		`"a\nb\t\"c\"\\"`: "a\nb\t\"c\"\\",
		`"\u00e9"`:        "é",
		`"a\/b"`:          "a/b",    // escapes: encoding/json decodes them
		`"\ud83d\ude00"`:  "😀",      // a surrogate pair: likewise
		`"\ud83d"`:        "\ufffd", // half of one: replaced, as encoding/json does
		"\"\xff\"":        "\ufffd", // not UTF-8: likewise
	} {
		var c Content
		if err := json.Unmarshal([]byte(in), &c); err != nil || c.Text != want {
			t.Errorf("content %s decoded to %q, %v; want %q", in, c.Text, err, want)
		}
	}
}
