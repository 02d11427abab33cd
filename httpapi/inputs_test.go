package httpapi

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestParseInputs(t *testing.T) {
	for _, tc := range []struct {
		raw    string
		want   inputs
		param  string // the field an error names; "" for none
		reason string
	}{
		{`"hi"`, inputs{texts: []string{"hi"}}, "", ""},
		{`["a","b"]`, inputs{texts: []string{"a", "b"}}, "", ""},
		{`[1,2,3]`, inputs{tokens: [][]int{{1, 2, 3}}}, "", ""},
		{`[[1],[2,3]]`, inputs{tokens: [][]int{{1}, {2, 3}}}, "", ""},
		{``, inputs{}, "input", "missing"},
		{`null`, inputs{}, "input", "missing"},
		{`""`, inputs{}, "input", "empty string"},
		{`[]`, inputs{}, "input", "empty array"},
		{`["a",""]`, inputs{}, "input[1]", "empty string"},
		{`["a",1]`, inputs{}, "input[1]", "got a number"},
		{`[1,"a"]`, inputs{}, "input", "token ids"},
		{`[1,-2]`, inputs{}, "input[1]", "token id"},
		{`[1,2.5]`, inputs{}, "input[1]", "token id"},
		{`[[1],[]]`, inputs{}, "input[1]", "empty token array"},
		{`[[1],"a"]`, inputs{}, "input[1]", "token ids"},
		{`{"a":1}`, inputs{}, "input", "got an object"},
		{`true`, inputs{}, "input", "got a bool"},
		{`[` + strings.Repeat(`"a",`, maxInputs) + `"a"]`, inputs{}, "input", "at most 2048"},
	} {
		got, a := parseInputs("input", json.RawMessage(tc.raw))
		switch {
		case tc.param == "" && a != nil:
			t.Errorf("%s: %v", tc.raw, a.message)
		case tc.param == "" && !reflect.DeepEqual(got, tc.want):
			t.Errorf("%s: got %+v, want %+v", tc.raw, got, tc.want)
		case tc.param != "" && a == nil:
			t.Errorf("%.40s: accepted, want an error naming %s", tc.raw, tc.param)
		case tc.param != "" && (a.param != tc.param || !strings.Contains(a.message, tc.reason)):
			t.Errorf("%.40s: %s (param %q), want param %q saying %q", tc.raw, a.message, a.param, tc.param, tc.reason)
		}
	}
	// 2,048 inputs are one call.
	many := `[` + strings.Repeat(`"a",`, maxInputs-1) + `"a"]`
	if got, a := parseInputs("input", json.RawMessage(many)); a != nil || len(got.texts) != maxInputs {
		t.Fatalf("2048 inputs: %d, %v", len(got.texts), a)
	}
}

// FuzzParseInputs: any value either parses into at least one non-empty input of one form,
// or is refused naming the field or one of its elements; it never panics.
func FuzzParseInputs(f *testing.F) {
	for _, s := range []string{`"hi"`, `["a","b"]`, `[1,2]`, `[[1],[2]]`, `[]`, `[1,"a"]`, `[[1],"a"]`, `null`, `{}`, `[1e3]`, `[[-1]]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return // the request's decoder refused it before
		}
		in, a := parseInputs("input", raw)
		if a != nil {
			if !strings.HasPrefix(a.param, "input") || a.status != 400 {
				t.Fatalf("%q: error %+v", raw, a)
			}
			return
		}
		if (len(in.texts) == 0) == (len(in.tokens) == 0) {
			t.Fatalf("%q: %+v: want exactly one form, not empty", raw, in)
		}
		for _, s := range in.texts {
			if s == "" {
				t.Fatalf("%q: an empty text was accepted", raw)
			}
		}
		for _, ids := range in.tokens {
			if len(ids) == 0 {
				t.Fatalf("%q: an empty token array was accepted", raw)
			}
		}
	})
}
