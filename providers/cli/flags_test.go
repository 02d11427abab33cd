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
