package httpapi

import (
	"context"
	"crypto/sha256"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/providers/llm"
)

// clientGateway records the client each call's context carries.
type clientGateway struct {
	stubGateway
	mu   sync.Mutex
	seen []llm.Client
}

func (g *clientGateway) Start(ctx context.Context, model string, prio llm.Priority, req *llm.Request) (llm.Served, error) {
	g.mu.Lock()
	g.seen = append(g.seen, llm.ClientOf(ctx))
	g.mu.Unlock()
	return g.stubGateway.Start(ctx, model, prio, req)
}

// runtimeKeys is a KeyResolver over a map of digests.
type runtimeKeys map[[sha256.Size]byte]ClientKey

func (rk runtimeKeys) ResolveDigest(_ context.Context, d [sha256.Size]byte) (ClientKey, bool) {
	k, ok := rk[d]
	return k, ok
}
func (rk runtimeKeys) Any() bool { return len(rk) > 0 }

// TestClientAuth: the key a request presents puts its client on the call's context, config
// keys and run-time keys alike; plain APIKeys are named by position.
func TestClientAuth(t *testing.T) {
	alice := llm.Client{Name: "alice", Weight: 3, MaxRunning: 2, MaxQueued: 5, RPM: 60, TPM: 1000}
	bob := llm.Client{Name: "bob", Weight: 1}
	cases := []struct {
		name  string
		opts  Options
		key   string
		want  llm.Client
		code  int
		admin string
	}{
		{"config object", Options{Clients: []ClientKey{{Secret: "sk-alice", Client: alice}, {Secret: "sk-bob", Client: bob}}}, "sk-alice", alice, 200, ""},
		{"second key", Options{Clients: []ClientKey{{Secret: "sk-alice", Client: alice}, {Secret: "sk-bob", Client: bob}}}, "sk-bob", bob, 200, ""},
		{"plain keys", Options{APIKeys: []string{"k1", "k2"}}, "k2", llm.Client{Name: "key-2", Weight: 1}, 200, ""},
		{"wrong key", Options{Clients: []ClientKey{{Secret: "sk-alice", Client: alice}}}, "sk-alic", llm.Client{}, 401, ""},
		{"run-time key", Options{Clients: []ClientKey{{Secret: "sk-alice", Client: alice}},
			Keys: runtimeKeys{sha256.Sum256([]byte("tg-bob")): {Client: bob}}}, "tg-bob", bob, 200, ""},
		{"run-time keys only", Options{Keys: runtimeKeys{sha256.Sum256([]byte("tg-bob")): {Client: bob}}}, "nope", llm.Client{}, 401, ""},
		{"auth off", Options{}, "", llm.Client{}, 200, ""},
		// The config's client keys stand in for admin keys when there are none; a run-time key never does.
		{"admin by config key", Options{Clients: []ClientKey{{Secret: "sk-alice", Client: alice}}}, "sk-alice", alice, 200, "sk-alice"},
		{"admin by run-time key", Options{Clients: []ClientKey{{Secret: "sk-alice", Client: alice}},
			Keys: runtimeKeys{sha256.Sum256([]byte("tg-bob")): {Client: bob}}}, "tg-bob", bob, 200, "tg-bob"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := &clientGateway{stubGateway: stubGateway{&script{}}}
			tc.opts.Gateway, tc.opts.Logger = g, zerolog.Nop()
			tc.opts.State = func() any { return map[string]int{} }
			s := New(tc.opts)
			req := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(`{"model":"p/m","messages":[{"role":"user","content":"hi"}]}`))
			req.Header.Set("Authorization", "Bearer "+tc.key)
			w := httptest.NewRecorder()
			s.ServeHTTP(w, req)
			if w.Code != tc.code {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.code, w.Body)
			}
			if tc.code == 200 && (len(g.seen) != 1 || g.seen[0] != tc.want) {
				t.Errorf("gateway saw %+v, want %+v", g.seen, tc.want)
			}
			if tc.admin != "" {
				req := httptest.NewRequest("GET", "/admin/state", nil)
				req.Header.Set("Authorization", "Bearer "+tc.admin)
				w := httptest.NewRecorder()
				s.ServeHTTP(w, req)
				if want := map[bool]int{true: 200, false: 401}[tc.admin == "sk-alice"]; w.Code != want {
					t.Errorf("/admin/state with %s: %d, want %d", tc.admin, w.Code, want)
				}
			}
		})
	}
}
