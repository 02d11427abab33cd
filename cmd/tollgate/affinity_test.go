package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/option"
	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/cmd/internal/fakellm"
)

// Session affinity (SPEC §19) end to end: the official openai-go client through the gateway
// to fakellm behind a provider of three keys. Round-robin alone would put each turn on the
// next key; with affinity a conversation's turns stay on its key, and two conversations
// spread.

func affinityConfig(url string) string {
	return fmt.Sprintf(`
providers:
  - name: oai
    kind: openai
    base_url: %s/v1
    keys: [key-a, key-b, key-c]
    models:
      - id: fake-model
`, url)
}

// TestAffinityKeepsTheKey: turns of conversations one and two, interleaved, each on the key
// its first turn took; the log line says new, then hit; /admin/state counts the bindings. A
// rate-limited bound key is skipped at once (moved), and the binding follows.
func TestAffinityKeepsTheKey(t *testing.T) {
	be := startRecorded(t, fakellm.Options{Chunks: 2})
	logs := &logLines{}
	g := serveGateway(t, affinityConfig(be.URL), nil, zerolog.New(logs))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// attempt makes one turn of conv and returns the keys its backend attempts used.
	attempt := func(conv string) []string {
		t.Helper()
		n := len(be.arrivals())
		if s := chatSDK(ctx, g.URL, "oai/fake-model", "hi", option.WithJSONSet("prompt_cache_key", conv)); s.err != nil {
			t.Fatalf("%s: %v", conv, s.err)
		}
		var keys []string
		for _, a := range be.arrivals()[n:] {
			keys = append(keys, a.key)
		}
		return keys
	}
	turn := func(conv string) string {
		t.Helper()
		keys := attempt(conv)
		if len(keys) != 1 {
			t.Fatalf("%s: backend calls on %v, want 1", conv, keys)
		}
		return keys[0]
	}
	one, two := turn("one"), turn("two")
	if one == two {
		t.Fatalf("two conversations on the same key %s: they should spread", one)
	}
	for i := range 3 {
		if k := turn("one"); k != one {
			t.Fatalf("conversation one's turn %d on %s, want %s", i+2, k, one)
		}
		if k := turn("two"); k != two {
			t.Fatalf("conversation two's turn %d on %s, want %s", i+2, k, two)
		}
	}
	if n := providerOf(t, g, "oai").AffinityBindings; n != 2 {
		t.Errorf("affinity_bindings %d, want 2", n)
	}
	var said []any
	for _, l := range logs.requests("/v1/chat/completions") {
		said = append(said, l["affinity"])
	}
	if fmt.Sprint(said) != "[new new hit hit hit hit hit hit]" {
		t.Errorf("log lines' affinity %v, want new new, then hits", said)
	}

	// Conversation one's key is rate-limited: its retry takes another key, where the
	// binding moves, and the next turn does not try the cooling key.
	be.script(t, fakellm.Script{Keys: map[string]fakellm.KeyScript{one: {Mode: "rate-limited", For: fakellm.Duration(time.Minute)}}})
	keys := attempt("one")
	if len(keys) != 2 || keys[0] != one || keys[1] == one {
		t.Fatalf("conversation one's turn on keys %v, want %s (rate-limited) then another", keys, one)
	}
	moved := keys[1]
	if k := turn("one"); k != moved {
		t.Errorf("after the move, conversation one's next turn on %s, want %s where it moved", k, moved)
	}
	lines := logs.requests("/v1/chat/completions")
	if got := lines[len(lines)-2]["affinity"]; got != "moved" {
		t.Errorf("the moved turn's log line says affinity %v, want moved", got)
	}
}

// TestAgentsAffinity: each real coding agent (Codex CLI, Claude Code) runs its one-tool task
// twice through the gateway, on the native backend of two keys: both turns of a session
// (the tool call and the answer) reach the backend on the same key, the second session on
// the other key. The agents name their sessions themselves (Codex's prompt_cache_key and
// session header, Claude Code's session header); like agents_test.go it skips when a CLI
// is absent, unless CI is set.
func TestAgentsAffinity(t *testing.T) {
	for _, a := range agents {
		t.Run(a.cli.name, func(t *testing.T) {
			opts := fakellm.Options{Modes: fakellm.ModeToolCall, Chunks: 4,
				Models: []string{"fake-model", agents[0].model, agents[1].model}}
			fake := fakellm.New(opts)
			srv := httptest.NewServer(fake)
			t.Cleanup(srv.Close)
			logs := &logLines{}
			cfg := strings.ReplaceAll(agentConfig(srv.URL, true), "keys: [test-key]", "keys: [key-a, key-b]")
			g := serveGateway(t, cfg, nil, zerolog.New(logs))
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			marker := newMarker(t)
			var used []string
			for run := range 2 {
				cmd, stdout := agentCmd(ctx, t, a, g.URL, a.model, marker)
				if err := cmd.Run(); err != nil {
					t.Fatalf("%s run %d: %v\nstdout:\n%s", a.cli.name, run+1, err, stdout)
				}
				if got := a.final(stdout.Bytes()); got != fakellm.ToolDoneReply {
					t.Fatalf("run %d: final answer %q, want %q", run+1, got, fakellm.ToolDoneReply)
				}
				var grew []string
				for k, c := range fake.Stats().ByKey {
					if c.Requests > 0 && !slices.Contains(used, k) {
						grew = append(grew, fmt.Sprintf("%s:%d", k, c.Requests))
						used = append(used, k)
					}
				}
				if len(grew) != 1 || !strings.HasSuffix(grew[0], ":2") {
					t.Fatalf("run %d: the session's calls reached the backend on %v, want both turns on one new key (all: %+v)",
						run+1, grew, fake.Stats().ByKey)
				}
			}
			var said []any
			for _, l := range logs.requests(a.route) {
				said = append(said, l["affinity"])
			}
			if fmt.Sprint(said) != "[new hit new hit]" {
				t.Errorf("log lines' affinity %v, want new hit, twice", said)
			}
			g.waitIdle(t)
			waitNoProcesses(t, marker, 5*time.Second)
		})
	}
}
