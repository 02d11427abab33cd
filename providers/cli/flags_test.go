package cli

import (
	"slices"
	"testing"
)

func TestBuiltFlags(t *testing.T) {
	cases := []struct {
		kind       string
		has, lacks []string
	}{
		{KindCodex, []string{"--json", "--skip-git-repo-check", "--sandbox", "-s", "--ephemeral", "--color", "--model", "-m"},
			[]string{"-c", "-", "exec", "--model=model"}},
		{KindClaude, []string{"-p", "--print", "--output-format", "--verbose", "--include-partial-messages", "--tools",
			"--strict-mcp-config", "--permission-mode", "--no-session-persistence", "--model", "--effort"}, []string{"stream-json", "dontAsk"}},
		{KindGemini, []string{"--output-format", "-o", "--approval-mode", "--model", "-m"}, []string{"stream-json", "default"}},
	}
	for _, tc := range cases {
		got := BuiltFlags(tc.kind)
		for _, f := range tc.has {
			if !slices.Contains(got, f) {
				t.Errorf("%s: %q missing from %v", tc.kind, f, got)
			}
		}
		for _, f := range tc.lacks {
			if slices.Contains(got, f) {
				t.Errorf("%s: %q listed in %v", tc.kind, f, got)
			}
		}
		if !slices.IsSorted(got) {
			t.Errorf("%s: not sorted: %v", tc.kind, got)
		}
	}
	if BuiltFlags("openai") != nil {
		t.Error("a kind without a CLI has built flags")
	}
}

func TestStderrDetail(t *testing.T) {
	cases := []struct {
		name, stderr string
		n, limit     int
		want         string
	}{
		{"empty", "\n \n", 3, 600, ""},
		{"short", "one\n\ntwo\n", 3, 600, "one | two"},
		{"tail only", "a\nb\nc\nd\n", 3, 600, "b | c | d"},
		{"error leads", "error: bad flag\n\nUsage: x\n\nmore\n\nFor help, try '--help'.\n", 3, 600,
			"error: bad flag | more | For help, try '--help'."},
		{"error already in the tail", "progress\nError: boom\nbye\n", 3, 600, "progress | Error: boom | bye"},
		{"last error wins", "error: first\nerror: second\na\nb\nc\n", 3, 600, "error: second | b | c"},
		{"tail cut keeps its end", "aaaaaaaaaa\nbbbbbbbbbb\n", 3, 8, "…bbbbbbbb"},
		{"error-led cut keeps its start", "fatal: 世界世界\nx\ny\nz\n", 3, 11, "fatal: 世…"},
	}
	for _, tc := range cases {
		if got := stderrDetail(tc.stderr, tc.n, tc.limit); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
