package app

import (
	"context"
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/cmd/internal/config"
	"github.com/tollgate/tollgate/providers/llm"
)

// TestEmbeddedDefaultAnswersAgentNames: on the embedded default with nothing discovered, the
// model names the docs give Codex and Claude Code (and those they send for side tasks) lead
// to the demo, so an agent's first run is answered instead of refused with a 404; a name of
// neither family is still unknown.
func TestEmbeddedDefaultAnswersAgentNames(t *testing.T) {
	cfg := config.Default(func(string) (string, bool) { return "", false },
		func(string) (string, error) { return "", exec.ErrNotFound }, func(string) bool { return false })
	a, err := New(context.Background(), cfg, Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	drainAtEnd(t, a)
	for _, name := range []string{"gpt-5-codex", "gpt-5.1-codex-max", "claude-sonnet-4-5-20250929", "claude-haiku-4-5-20251001", "claude-opus-4-1"} {
		req := &llm.Request{Model: name, Messages: []llm.Message{{Role: "user", Content: llm.Content{Text: "Say hi."}}}}
		sv, err := a.Gateway.Start(t.Context(), name, llm.Interactive, req)
		if err != nil {
			t.Errorf("%s on the embedded default: %v", name, err)
			continue
		}
		var text strings.Builder
		for {
			ch, err := sv.Stream.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			text.WriteString(ch.Content)
		}
		_ = sv.Stream.Close()
		if sv.Model != "demo/echo" || text.Len() == 0 {
			t.Errorf("%s served by %q with %q, want demo/echo's answer", name, sv.Model, text.String())
		}
	}
	if err := a.Gateway.Resolve("llama3", &llm.Request{Model: "llama3"}); llm.KindOf(err) != llm.KindModelNotFound {
		t.Errorf("llama3 on the embedded default: %v, want model_not_found", err)
	}
}
