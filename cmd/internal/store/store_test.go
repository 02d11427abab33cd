package store

import (
	"context"
	"crypto/sha256"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/cmd/internal/store/pgtest"
	"github.com/tollgate/tollgate/httpapi"
	"github.com/tollgate/tollgate/providers/llm"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// engines runs f against SQLite and PostgreSQL, each with a fresh database; f gets the
// options that open it.
func engines(t *testing.T, f func(t *testing.T, o Options)) {
	t.Run("sqlite", func(t *testing.T) {
		f(t, Options{SQLite: filepath.Join(t.TempDir(), "state", "tollgate.db")})
	})
	t.Run("postgres", func(t *testing.T) {
		f(t, Options{Postgres: pgtest.Start(t)})
	})
}

var prices = map[string]Price{"oa/gpt": {Input: 2, CachedInput: 0.5, Output: 8}}

func open(t *testing.T, o Options, c *clock) *Store {
	t.Helper()
	o.Now, o.Logger = c.Now, zerolog.Nop()
	o.Config = []ConfigKey{{Name: "alice", KeyLimits: httpapi.KeyLimits{Weight: 2,
		Budget: &httpapi.KeyBudget{USD: 1, Period: "day"}}}}
	o.Prices = func(m string) Price { return prices[m] }
	s, err := Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestStore: run-time keys, the ledger, usage and spend, and a restart that keeps them, on
// both engines.
func TestStore(t *testing.T) {
	engines(t, func(t *testing.T, o Options) {
		ctx := context.Background()
		c := &clock{t: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}
		s := open(t, o, c)
		if s.Any() {
			t.Error("Any before a run-time key was made")
		}
		if _, _, err := s.CreateKey(ctx, "alice", httpapi.KeyLimits{Weight: 1}); !isField(err, "name") {
			t.Errorf("taking a config key's name: %v, want a KeyError on name", err)
		}
		lim := httpapi.KeyLimits{Weight: 3, MaxRunning: 2, RateLimit: httpapi.KeyRate{RPM: 60}, Models: []string{"oa/*"},
			MaxPriority: "normal", Budget: &httpapi.KeyBudget{USD: 5, Period: "month"}}
		info, secret, err := s.CreateKey(ctx, "bob", lim)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(secret, "tg-") || len(secret) != 3+43 || info.Source != "admin" || info.CreatedAt == nil {
			t.Errorf("created %+v with secret of %d chars", info, len(secret))
		}
		if _, _, err := s.CreateKey(ctx, "bob", lim); !isField(err, "name") {
			t.Errorf("second bob: %v", err)
		}
		ck, ok := s.ResolveDigest(ctx, sha256.Sum256([]byte(secret)))
		want := llm.Client{Name: "bob", Weight: 3, MaxRunning: 2, RPM: 60}
		if !ok || ck.Client != want || !ck.LimitPriority || ck.MaxPriority != llm.Normal || len(ck.Models) != 1 {
			t.Errorf("resolve = %+v %v", ck, ok)
		}

		// Rotation: the old secret works for the grace, then not.
		_, secret2, err := s.RotateKey(ctx, "bob", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := s.ResolveDigest(ctx, sha256.Sum256([]byte(secret))); !ok {
			t.Error("old secret refused within its grace")
		}
		c.Add(time.Minute)
		if _, ok := s.ResolveDigest(ctx, sha256.Sum256([]byte(secret))); ok {
			t.Error("old secret accepted after its grace")
		}
		if _, ok := s.ResolveDigest(ctx, sha256.Sum256([]byte(secret2))); !ok {
			t.Error("new secret refused")
		}
		p, err := s.PatchKey(ctx, "bob", httpapi.KeyPatch{Limits: httpapi.KeyLimits{MaxQueued: 7},
			Set: map[string]bool{"max_queued": true}, Clear: map[string]bool{"budget": true, "rate_limit.rpm": true}})
		if err != nil || p.MaxQueued != 7 || p.Budget != nil || p.RateLimit.RPM != 0 || p.Weight != 3 {
			t.Errorf("patch = %+v, %v", p, err)
		}
		if _, err := s.PatchKey(ctx, "alice", httpapi.KeyPatch{}); !isField(err, "name") {
			t.Errorf("patching a config key: %v", err)
		}
		if _, err := s.RevokeKey(ctx, "nobody"); !errors.Is(err, httpapi.ErrNoSuchKey) {
			t.Errorf("revoking nobody: %v", err)
		}

		// Spend: alice's calls cost 2*1000/1e6 + 0.5*1000/1e6 + 8*500/1e6 each.
		u := llm.Usage{PromptTokens: 2000, CachedTokens: 1000, CompletionTokens: 500, ReasoningTokens: 100}
		for i := range 3 {
			cost := s.Record(httpapi.LedgerEntry{At: c.Now(), RequestID: "r", Key: "alice", Route: "/v1/chat/completions",
				Provider: "oa", Model: "oa/gpt", ServedModel: "oa/gpt", Usage: u, Status: 200, Attempts: 1})
			if want := 0.0065; !near(cost, want) {
				t.Fatalf("call %d cost %v, want %v", i, cost, want)
			}
		}
		s.Record(httpapi.LedgerEntry{At: c.Now(), Key: "bob", Model: "oa/nope", Status: 404, Code: "model_not_found"})
		s.Used("alice", c.Now())
		spent, budget, resets := s.Spend("alice", c.Now())
		if !near(spent, 0.0195) || budget != 1 || !resets.Equal(time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)) {
			t.Errorf("alice's spend = %v of %v until %v", spent, budget, resets)
		}
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		rep, err := s.Usage(ctx, httpapi.UsageQuery{From: c.Now().Add(-time.Hour), To: c.Now().Add(time.Hour), GroupBy: []string{"key", "model"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Rows) != 2 || *rep.Rows[0].Key != "alice" || rep.Rows[0].Requests != 3 || rep.Rows[0].TokensIn != 6000 ||
			rep.Rows[0].CachedIn != 3000 || rep.Rows[0].Reasoning != 300 || rep.Rows[1].Errors != 1 || rep.Rows[0].Day != nil ||
			rep.Total.Requests != 4 || !near(rep.Total.CostUSD, 0.0195) {
			t.Errorf("usage = %+v", rep)
		}
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}

		// A restart keeps the keys, the spend the store acknowledged and the last use.
		s = open(t, o, c)
		defer s.Close(ctx)
		if spent, _, _ := s.Spend("alice", c.Now()); !near(spent, 0.0195) {
			t.Errorf("alice's spend after a restart = %v, want 0.0195", spent)
		}
		keys, _ := s.ListKeys(ctx)
		if len(keys) != 2 || keys[0].Name != "alice" || keys[0].Source != "config" || keys[0].LastUsedAt == nil ||
			keys[1].Name != "bob" || keys[1].MaxQueued != 7 {
			t.Errorf("keys after a restart = %+v", keys)
		}
		if !s.Any() {
			t.Error("Any after a restart with bob stored")
		}
		if _, err := s.RevokeKey(ctx, "bob"); err != nil {
			t.Fatal(err)
		}
		if _, ok := s.ResolveDigest(ctx, sha256.Sum256([]byte(secret2))); ok {
			t.Error("revoked key resolved")
		}
		// A new day starts alice's budget again.
		c.Add(14 * time.Hour)
		if spent, _, _ := s.Spend("alice", c.Now()); spent != 0 {
			t.Errorf("alice's spend on a new day = %v", spent)
		}
	})
}

// TestStoreUnreachable: a database that cannot be reached fails Open.
func TestStoreUnreachable(t *testing.T) {
	_, err := Open(context.Background(), Options{Postgres: "postgres://u@127.0.0.1:1/db?sslmode=disable&connect_timeout=2", Logger: zerolog.Nop()})
	if err == nil || !strings.Contains(err.Error(), "cannot reach postgres") {
		t.Fatalf("Open = %v, want cannot reach", err)
	}
}

// TestLedgerOverflow: with the database gone, entries past the buffer drop the oldest, each
// counted, and Record still returns at once.
func TestLedgerOverflow(t *testing.T) {
	c := &clock{t: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}
	var mu sync.Mutex
	dropped := 0
	s := open(t, Options{SQLite: filepath.Join(t.TempDir(), "t.db"), Buffer: 3, OnDrop: func(n int) {
		mu.Lock()
		dropped += n
		mu.Unlock()
	}}, c)
	_ = s.db.Close() // every write fails from now on
	for range 5 {
		s.Record(httpapi.LedgerEntry{At: c.Now(), Key: "alice", Status: 200})
	}
	mu.Lock()
	got := dropped
	mu.Unlock()
	if got < 2 {
		t.Errorf("dropped %d, want at least 2 of 5 past a buffer of 3", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := s.Close(ctx); err == nil {
		t.Error("Close with unwritten entries returned no error")
	}
}

func TestPeriodOf(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC) // a Wednesday
	for _, tc := range []struct {
		p          string
		start, end string
	}{
		{"day", "2026-12-02", "2026-12-03"},
		{"week", "2026-11-30", "2026-12-07"},
		{"month", "2026-12-01", "2027-01-01"},
	} {
		s, e := periodOf(at, tc.p)
		if s.Format(time.DateOnly) != tc.start || e.Format(time.DateOnly) != tc.end {
			t.Errorf("%s: [%s, %s), want [%s, %s)", tc.p, s, e, tc.start, tc.end)
		}
	}
}

func isField(err error, field string) bool {
	var ke *httpapi.KeyError
	return errors.As(err, &ke) && ke.Field == field
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// TestOpenTogether: gateways opening one new SQLite file at once all start: the migration
// lock makes them take turns (without it one in a few runs fails "table already exists").
func TestOpenTogether(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tollgate.db")
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			s, err := Open(context.Background(), Options{SQLite: path, Logger: zerolog.Nop()})
			if err == nil {
				err = s.Close(context.Background())
			}
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
