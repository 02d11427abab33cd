package config

import (
	"strings"
	"testing"
)

func TestExpand(t *testing.T) {
	env := func(name string) (string, bool) {
		v, ok := map[string]string{"A": "alpha", "EMPTY": "", "NL": "x\ny", "K": "sk-key-000001"}[name]
		return v, ok
	}
	tests := []struct {
		name, in, want, err string
	}{
		{"plain", "a: ${A}\n", "a: alpha\n", ""},
		{"several on a line", "a: ${A}-${A}\n", "a: alpha-alpha\n", ""},
		{"quoted", `a: "${A}"`, `a: "alpha"`, ""},
		{"no braces left alone", "a: $A and $\n", "a: $A and $\n", ""},
		{"escape", "a: $${A}\n", "a: ${A}\n", ""},
		{"escape then var", "a: $${A} ${A}\n", "a: ${A} alpha\n", ""},
		{"default when unset", "a: ${NOPE:-dflt}\n", "a: dflt\n", ""},
		{"default when empty", "a: ${EMPTY:-dflt}\n", "a: dflt\n", ""},
		{"default not used when set", "a: ${A:-dflt}\n", "a: alpha\n", ""},
		{"empty default", "a: '${NOPE:-}'\n", "a: ''\n", ""},
		{"set but empty", "a: '${EMPTY}'\n", "a: ''\n", ""},
		{"whole-line comment", "# ${NOPE}\na: 1\n", "# ${NOPE}\na: 1\n", ""},
		{"trailing comment", "a: ${A} # ${NOPE}\n", "a: alpha # ${NOPE}\n", ""},
		{"hash inside quotes is not a comment", `a: "x # ${A}"`, `a: "x # alpha"`, ""},
		{"hash without space is not a comment", "a: x#${A}\n", "a: x#alpha\n", ""},
		{"apostrophe in plain scalar", "a: it's ${A} # ${NOPE}\n", "a: it's alpha # ${NOPE}\n", ""},
		{"single-quote escape", "a: 'it''s # ${A}' # ${NOPE}\n", "a: 'it''s # alpha' # ${NOPE}\n", ""},
		{"unset", "x: 1\na: ${NOPE}\n", "", "t.yaml:2: environment variable NOPE is not set"},
		{"bad name", "a: ${1A}\n", "", "t.yaml:1: ${1A}: not a valid environment variable name"},
		{"empty name", "a: ${}\n", "", "${}: not a valid environment variable name"},
		{"unterminated", "a: ${A\n", "", "t.yaml:1: unterminated ${"},
		{"newline in value", "a: ${NL}\n", "", "environment variable NL contains a line break"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, errs := expand("t.yaml", []byte(tt.in), env)
			if tt.err != "" {
				if len(errs) == 0 || !strings.Contains(errs[0].Error(), tt.err) {
					t.Fatalf("errors = %v, want %q", errs, tt.err)
				}
				return
			}
			if len(errs) > 0 {
				t.Fatalf("unexpected errors: %v", errs)
			}
			if string(out) != tt.want {
				t.Errorf("got %q, want %q", out, tt.want)
			}
		})
	}
}

func TestExpandReportsValuesForScrubbing(t *testing.T) {
	_, vals, _ := expand("t.yaml", []byte("a: ${K}\n"), func(string) (string, bool) { return "sk-key-000001", true })
	if len(vals) != 1 || vals[0] != "sk-key-000001" {
		t.Errorf("vals = %v", vals)
	}
}

func TestSplitComment(t *testing.T) {
	tests := []struct{ in, code string }{
		{"a: b # c", "a: b "},
		{"# all", ""},
		{"a: 'x # y' # z", "a: 'x # y' "},
		{`a: "x \" # y" # z`, `a: "x \" # y" `},
		{"a: b#c", "a: b#c"},
		{"- 'q' #c", "- 'q' "},
		{"a: [\"#\", b] # c", "a: [\"#\", b] "},
	}
	for _, tt := range tests {
		code, comment := splitComment(tt.in)
		if code != tt.code || code+comment != tt.in {
			t.Errorf("splitComment(%q) = %q, %q; want code %q", tt.in, code, comment, tt.code)
		}
	}
}
