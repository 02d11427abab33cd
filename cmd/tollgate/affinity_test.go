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

	"github.com/tollgate/tollgate/actors/replicas"
	"github.com/tollgate/tollgate/cmd/internal/cluster/redistest"
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

// affinityKey is the hash in which the replicas share the bindings (cmd/internal/cluster).
const affinityKey = "{tollgate}:affinity"

// TestAffinitySharedByReplicas: two replicas on one redis-server in front of one backend of
// three keys. A conversation bound on replica 1 (to its second key: its first turn went to
// another conversation) is served on that key by replica 2, whose own ring would take the
// first; with Redis stopped, a conversation replica 2 never served (bound on replica 1) is
// served at once, unbound, and one it served keeps its key from its own table.
func TestAffinitySharedByReplicas(t *testing.T) {
	redis := redistest.Start(t)
	be := startRecorded(t, fakellm.Options{Chunks: 2})
	cfg := func(replica string) string {
		return affinityConfig(be.URL) + fmt.Sprintf("cluster: {redis: {addr: %q}, lease_ttl: 1s, replica: %s}\n", redis.Addr(), replica)
	}
	logs1, logs2 := &logLines{}, &logLines{}
	r1 := serveGateway(t, cfg("r1"), nil, zerolog.New(logs1))
	r2 := serveGateway(t, cfg("r2"), nil, zerolog.New(logs2))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	turn := func(g *gateway, conv string) (string, time.Duration) {
		t.Helper()
		n := len(be.arrivals())
		began := time.Now()
		if s := chatSDK(ctx, g.URL, "oai/fake-model", "hi", option.WithJSONSet("prompt_cache_key", conv)); s.err != nil {
			t.Fatalf("%s: %v", conv, s.err)
		}
		took := time.Since(began)
		a := be.arrivals()[n:]
		if len(a) != 1 {
			t.Fatalf("%s: %d backend calls, want 1", conv, len(a))
		}
		return a[0].key, took
	}
	rdb := redis.Client()
	shared := func(conv string) {
		t.Helper()
		pollUntil(t, 5*time.Second, conv+"'s binding written to Redis", func() bool {
			return rdb.HExists(ctx, affinityKey, replicas.AffinityScope(conv)).Val()
		})
	}
	first, _ := turn(r1, "zero")
	one, _ := turn(r1, "one")
	if one == first {
		t.Fatalf("replica 1 put two conversations on %s", one)
	}
	shared("one")
	if k, _ := turn(r2, "one"); k != one {
		t.Fatalf("replica 2 served conversation one on %s, want %s where replica 1 bound it", k, one)
	}
	if k, _ := turn(r2, "one"); k != one {
		t.Fatalf("replica 2's second turn of conversation one on %s, want %s", k, one)
	}
	turn(r1, "three")
	shared("three")

	// Redis stopped: the first turn after waits at most for the leases' outage rule
	// (docs/architecture.md, "Without Redis"); once replica 2 knows Redis away, a lookup
	// costs nothing.
	redis.Stop()
	if _, took := turn(r2, "four"); took > 2*time.Second {
		t.Errorf("the first turn with Redis stopped took %s", took)
	}
	pollUntil(t, 10*time.Second, "replica 2 knowing Redis away", func() bool { return adminCluster(t, r2.URL).Redis == "down" })
	_, took := turn(r2, "three")
	if k, t2 := turn(r2, "one"); k != one {
		t.Errorf("with Redis away, replica 2 served conversation one on %s, want %s from its own table", k, one)
	} else {
		took = max(took, t2)
	}
	t.Logf("with Redis away the slower turn took %s (the round-trip bound is lease_ttl/5 = 200ms)", took.Round(time.Millisecond))
	if took > 500*time.Millisecond {
		t.Errorf("with Redis away a turn took %s: an affinity lookup must not wait for Redis", took)
	}
	var said []any
	for _, l := range logs2.requests("/v1/chat/completions") {
		said = append(said, l["affinity"])
	}
	if fmt.Sprint(said) != "[hit hit new new hit]" {
		t.Errorf("replica 2's log lines say affinity %v, want hit hit (bound on replica 1), new new (Redis stopped), hit (its own)", said)
	}
}
