package cli

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// Integration tests: the real Codex CLI and Claude Code, installed by .ci/install-clis,
// answering from fakeAPI over loopback. They skip when a CLI is absent, unless CI is set.

// realCLI finds a CLI: $envVar, else <repo>/.tools/node_modules/.bin/name.
func realCLI(t *testing.T, envVar, name string) string {
	t.Helper()
	p := os.Getenv(envVar)
	if p == "" {
		p, _ = filepath.Abs(filepath.Join("..", "..", ".tools", "node_modules", ".bin", name))
	}
	if st, err := os.Stat(p); err != nil || st.IsDir() {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s not installed at %s (run .ci/install-clis or set %s)", name, p, envVar)
		}
		t.Skipf("%s not installed at %s (run .ci/install-clis or set %s)", name, p, envVar)
	}
	return p
}

// codexAgainst configures the real codex to use api through a custom Responses provider.
func codexAgainst(t *testing.T, api *fakeAPI) *Backend {
	home := t.TempDir()
	b, err := New(Config{
		Kind: KindCodex, Name: "codex", Command: realCLI(t, "TOLLGATE_CODEX_BIN", "codex"),
		Env: map[string]string{"CODEX_HOME": home, "HOME": home, "TOLLGATE_TEST_KEY": "test-key"},
		Args: []string{"-c", "model_provider=mock", "-c", `model_providers.mock={name="mock",base_url="` +
			api.URL + `/v1",wire_api="responses",env_key="TOLLGATE_TEST_KEY",stream_max_retries=0,request_max_retries=0}`},
		KillGrace: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// claudeAgainst configures the real claude to use api as its Anthropic endpoint.
func claudeAgainst(t *testing.T, api *fakeAPI) *Backend {
	b, err := New(Config{
		Kind: KindClaude, Name: "claude", Command: realCLI(t, "TOLLGATE_CLAUDE_BIN", "claude"),
		Env:       map[string]string{"HOME": t.TempDir(), "ANTHROPIC_BASE_URL": api.URL, "ANTHROPIC_API_KEY": "test-key"},
		KillGrace: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRealCLIsAnswer(t *testing.T) {
	words := []string{"Hello", " from", " the", " fake", " 世界"}
	tests := []struct {
		name      string
		backend   func(*testing.T, *fakeAPI) *Backend
		minChunks int // content chunks: Claude streams tokens, Codex whole messages
	}{
		{"codex", codexAgainst, 1},
		{"claude", claudeAgainst, len(words)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			api := newFakeAPI(t, words, 20*time.Millisecond, false)
			b := tc.backend(t, api)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			s, err := b.Open(ctx, &llm.Request{Model: "some-model", Messages: []llm.Message{
				{Role: "system", Content: llm.Content{Text: "Answer briefly."}},
				{Role: "user", Content: llm.Content{Text: "say hi"}},
			}})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var text strings.Builder
			var chunks int
			var usage *llm.Usage
			var finish llm.FinishReason
			for {
				c, err := s.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("after %q: %v", text.String(), err)
				}
				if c.Content != "" {
					chunks++
				}
				text.WriteString(c.Content)
				if c.Usage != nil {
					usage = c.Usage
				}
				if c.FinishReason != "" {
					finish = c.FinishReason
				}
			}
			if got := text.String(); got != strings.Join(words, "") {
				t.Errorf("answer %q, want %q", got, strings.Join(words, ""))
			}
			if chunks < tc.minChunks || finish != llm.FinishStop || usage == nil || usage.CompletionTokens != 5 {
				t.Errorf("%d content chunks, finish %q, usage %+v; want ≥%d chunks, stop, 5 completion tokens",
					chunks, finish, usage, tc.minChunks)
			}
			pgid := pgidOf(t, s)
			s.Close()
			requireGroupGone(t, pgid)
		})
	}
}

func TestRealCLIsCancelledMidAnswer(t *testing.T) {
	tests := []struct {
		name    string
		backend func(*testing.T, *fakeAPI) *Backend
		// midStream: the CLI streams tokens, so cancel after some chunks arrived. Codex
		// prints nothing until its message is complete: cancel while Open waits for it.
		midStream bool
	}{
		{"codex", codexAgainst, false},
		{"claude", claudeAgainst, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			api := newFakeAPI(t, nil, 50*time.Millisecond, true)
			b := tc.backend(t, api)
			pgids := make(chan int, 1)
			b.onStart = func(pgid int) { pgids <- pgid }
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()

			if !tc.midStream {
				go func() { // exits when streaming starts or the test's context ends
					select {
					case <-api.streaming:
						cancel()
					case <-ctx.Done():
					}
				}()
			}
			start := time.Now()
			s, err := b.Open(ctx, &llm.Request{Model: "some-model", Messages: userRequest("count").Messages})
			if err == nil {
				if !tc.midStream {
					t.Fatal("Open returned a stream; the answer should not have started")
				}
				for i := 0; i < 3; i++ {
					if c, err := s.Next(); err != nil || c.Content == "" {
						t.Fatalf("chunk %d: %+v, %v", i, c, err)
					}
				}
				cancel()
				_, err = drain(t, s)
				s.Close()
			}
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err %v, want context.Canceled", err)
			}
			if d := time.Since(start); d > time.Minute {
				t.Errorf("took %v", d)
			}
			// Close (or Open's failure) returned only after reaping: nothing may be left.
			requireGroupGone(t, <-pgids)
			deadline := time.Now().Add(5 * time.Second)
			for api.hungUp() == 0 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if api.hungUp() == 0 {
				t.Error("the backend never saw the CLI hang up")
			}
		})
	}
}
