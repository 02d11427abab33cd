package app

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
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
	a, err := New(context.Background(), cfg, Options{StateDir: t.TempDir(), Logger: zerolog.Nop()})
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

// TestStoreOptionalOnlyForTheEmbeddedDefault: where no store can be opened (here the state
// directory is a file), the embedded default starts without one, and a configuration with
// client keys refuses to start.
func TestStoreOptionalOnlyForTheEmbeddedDefault(t *testing.T) {
	blocked := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(blocked, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default(func(string) (string, bool) { return "", false },
		func(string) (string, error) { return "", exec.ErrNotFound }, func(string) bool { return false })
	a, err := New(context.Background(), cfg, Options{StateDir: blocked, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatalf("the embedded default without a writable state directory: %v", err)
	}
	drainAtEnd(t, a)
	if a.tenants() != nil {
		t.Error("the embedded default has a store although none could be opened")
	}
	keyed, err := config.Parse("keyed.yaml", []byte("auth: {api_keys: [{name: alice, key: sk-alice}]}\nproviders:\n  - {name: demo, kind: fake, models: [{id: echo}]}\n"),
		func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if b, err := New(context.Background(), keyed, Options{StateDir: blocked, Logger: zerolog.Nop()}); err == nil {
		drainAtEnd(t, b)
		t.Fatal("client keys without a store that opens: the gateway started")
	}
}
