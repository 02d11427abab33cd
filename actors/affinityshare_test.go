package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/actors/replicas"
	"github.com/tollgate/tollgate/providers/llm"
)

// sharedBindings is a replicas.Shared with room for every call and the bindings of a test:
// Bound answers from held, bound age ago (or err), Bind records each batch in binds (and in
// held too when keep is set), and waits for gate when it is set.
type sharedBindings struct {
	mu      sync.Mutex
	held    map[string]replicas.Binding
	age     time.Duration
	keep    bool
	err     error
	lookups atomic.Int32
	binds   chan []replicas.Binding
	gate    chan struct{} // nil: Bind answers at once
	entered chan struct{} // told of each Bind as it begins
	cut     atomic.Int32  // Binds whose context ended before gate opened
}

func newSharedBindings() *sharedBindings {
	return &sharedBindings{held: map[string]replicas.Binding{}, age: time.Minute, binds: make(chan []replicas.Binding, 100),
		entered: make(chan struct{}, 100)}
}

type freeLease struct{}

func (freeLease) Release() {}

func (s *sharedBindings) Acquire(_ context.Context, claims []replicas.Claim) ([]replicas.Lease, error) {
	ls := make([]replicas.Lease, len(claims))
	for i := range ls {
		ls[i] = freeLease{}
	}
	return ls, nil
}
func (s *sharedBindings) Health() replicas.Health {
	return replicas.Health{Redis: "ok", Phase: "shared"}
}
func (s *sharedBindings) Occupancy(context.Context, []string) (map[string]map[string]int, error) {
	return map[string]map[string]int{}, nil
}
func (s *sharedBindings) Cool(_ context.Context, _ string, d time.Duration) (time.Duration, error) {
	return d, nil
}
func (s *sharedBindings) Cooldowns(context.Context, []string) (map[string]time.Duration, error) {
	return map[string]time.Duration{}, nil
}
func (s *sharedBindings) Adjust(context.Context, replicas.Bucket, int) error { return nil }
func (s *sharedBindings) Learn(_ context.Context, _ string, lanes, _ int) (int, error) {
	return lanes, nil
}
func (s *sharedBindings) Learned(context.Context, []string) (map[string]int, error) {
	return map[string]int{}, nil
}

func (s *sharedBindings) Bound(_ context.Context, name string, _ replicas.Affinity) (replicas.Binding, time.Duration, bool, error) {
	s.lookups.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return replicas.Binding{}, 0, false, s.err
	}
	b, ok := s.held[name]
	return b, s.age, ok, nil
}

// Bindings counts held by provider (or answers err).
func (s *sharedBindings) Bindings(_ context.Context, providers []string, _ replicas.Affinity) (map[string]int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	out := map[string]int{}
	for _, b := range s.held {
		out[b.Provider]++
	}
	return out, nil
}

func (s *sharedBindings) Bind(ctx context.Context, bs []replicas.Binding, _ replicas.Affinity) error {
	s.entered <- struct{}{}
	if s.gate != nil {
		select {
		case <-s.gate:
		case <-ctx.Done():
			s.cut.Add(1)
			return ctx.Err()
		}
	}
	if s.keep {
		s.mu.Lock()
		for _, b := range bs {
			s.held[b.Name] = b
		}
		s.mu.Unlock()
	}
	s.binds <- bs
	return nil
}

// sharedGateway is a gateway on sh whose provider p has model m and keys keys (b records
// which each call takes), and its Shutdown, run once (at the latest when the test ends).
func sharedGateway(t *testing.T, sh replicas.Shared, b *keyedDown) (*Gateway, func()) {
	t.Helper()
	return sharedGatewayAt(t, sh, b, nil)
}

// sharedGatewayAt is sharedGateway on clock now (nil: the wall clock).
func sharedGatewayAt(t *testing.T, sh replicas.Shared, b *keyedDown, now func() time.Time) (*Gateway, func()) {
	t.Helper()
	p := testProvider("p", b, "m")
	p.Keys, p.Lanes = b.keys, 4
	p.Models[0].Lanes = 4
	g, err := New(Options{MaxRunning: 10, MaxAdmitted: 20, Providers: []Provider{p}, Logger: zerolog.Nop(), Shared: sh, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	shutdown := func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), patience)
			defer cancel()
			if err := g.Shutdown(ctx); err != nil {
				t.Errorf("shutdown: %v", err)
			}
		})
	}
	t.Cleanup(shutdown)
	return g, shutdown
}

// turn makes one call of conversation conv and returns what it said of affinity.
func turn(t *testing.T, g *Gateway, conv string) string {
	t.Helper()
	sv, err := g.Start(context.Background(), "p/m", llm.Interactive, &llm.Request{Conversation: conv,
		Messages: []llm.Message{{Role: "user", Content: llm.Content{Text: "hi"}}}})
	if err != nil {
		t.Fatalf("%s: %v", conv, err)
	}
	if _, err := drain(t, sv.Stream); err != nil {
		t.Fatal(err)
	}
	return sv.Affinity
}

// TestSharedBindingIsAdopted: a conversation this replica never served, bound by another
// replica to key 2, is served on key 2 (round-robin alone would take key 0) and counts as a
// hit; its next turn is served from the local table without asking again; each success is
// written through; a conversation the shared state does not know goes where the ring says;
// /admin/state counts the bindings as the shared state does.
func TestSharedBindingIsAdopted(t *testing.T) {
	sh := newSharedBindings()
	sh.held[replicas.AffinityScope("c")] = replicas.Binding{Name: replicas.AffinityScope("c"), Provider: "p", Key: 2, Model: "p/m"}
	sh.keep = true
	b := &keyedDown{keys: 3}
	g, _ := sharedGateway(t, sh, b)
	if got := turn(t, g, "c"); got != "hit" {
		t.Errorf("the first turn here of a conversation bound elsewhere says affinity %q, want hit", got)
	}
	if got := turn(t, g, "c"); got != "hit" || sh.lookups.Load() != 1 {
		t.Errorf("second turn: affinity %q after %d shared lookups, want hit after 1", got, sh.lookups.Load())
	}
	if got := turn(t, g, "new"); got != "new" || sh.lookups.Load() != 2 {
		t.Errorf("a conversation nobody bound: affinity %q after %d shared lookups, want new after 2", got, sh.lookups.Load())
	}
	if got := fmt.Sprint(b.keysUsed()); got != "[2 2 0]" {
		t.Errorf("keys used %s, want [2 2 0]", got)
	}
	written := map[string]replicas.Binding{}
	for len(written) < 2 {
		select {
		case bs := <-sh.binds:
			for _, x := range bs {
				written[x.Name] = x
			}
		case <-time.After(patience):
			t.Fatalf("written through: %v; want both conversations", written)
		}
	}
	if w := written[replicas.AffinityScope("new")]; w.Provider != "p" || w.Key != 0 || w.Model != "p/m" {
		t.Errorf("written %+v for the new conversation, want p key 0 p/m", w)
	}
	if n := waitState(t, g, "bindings counted", func(st AdminState) bool { return st.Providers[0].AffinityBindings == 2 }); n.Providers[0].AffinityBindings != 2 {
		t.Error("not counted")
	}
}

// TestNewerSharedBindingMoves: a replica serving a conversation on its own binding asks the
// shared state again once its binding is a second (recheck) old: a binding another replica
// made since (the conversation moved there) replaces its own, one older than its own does
// not, and within the second it asks nothing.
func TestNewerSharedBindingMoves(t *testing.T) {
	sh := newSharedBindings()
	b := &keyedDown{keys: 3}
	clock := &testClock{now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	g, _ := sharedGatewayAt(t, sh, b, clock.Now)
	scope := replicas.AffinityScope("c")
	steps := []struct {
		name    string
		advance time.Duration
		shared  *replicas.Binding // set in the shared state, bound age ago
		age     time.Duration
		want    string // affinity
		lookups int32
	}{
		{"the first turn: nobody bound it", 0, nil, 0, "new", 1},
		{"moved elsewhere since, within the second", 0, &replicas.Binding{Name: scope, Provider: "p", Key: 2, Model: "p/m"}, 0, "hit", 1},
		{"a second later: the newer binding is taken", time.Second, nil, 0, "hit", 2},
		{"an older one elsewhere: its own stays", 2 * time.Second, &replicas.Binding{Name: scope, Provider: "p", Key: 1, Model: "p/m"}, 30 * time.Second, "hit", 3},
	}
	for _, s := range steps {
		clock.advance(s.advance)
		if s.shared != nil {
			sh.mu.Lock()
			sh.held[scope], sh.age = *s.shared, s.age
			sh.mu.Unlock()
		}
		if got := turn(t, g, "c"); got != s.want || sh.lookups.Load() != s.lookups {
			t.Fatalf("%s: affinity %q after %d shared lookups, want %q after %d", s.name, got, sh.lookups.Load(), s.want, s.lookups)
		}
	}
	if got := fmt.Sprint(b.keysUsed()); got != "[0 0 2 2]" {
		t.Errorf("keys used %s, want the ring's first twice, then the newer binding's twice", got)
	}
}

// TestSharedBindingsAway: a shared state that does not answer leaves the call unbound
// ("new", on the ring's key) and served; a write that hangs delays no answer, coalesces the
// turns made meanwhile, and is cut off by Shutdown, whose writer exits (goleak checks).
func TestSharedBindingsAway(t *testing.T) {
	sh := newSharedBindings()
	sh.held[replicas.AffinityScope("c")] = replicas.Binding{Provider: "p", Key: 2, Model: "p/m"}
	sh.err = errors.New("redis away")
	sh.gate = make(chan struct{})
	b := &keyedDown{keys: 3}
	g, shutdown := sharedGateway(t, sh, b)
	for i := range 5 {
		if got := turn(t, g, "c"); got != map[bool]string{true: "new", false: "hit"}[i == 0] {
			t.Errorf("turn %d says affinity %q", i, got)
		}
	}
	if got := fmt.Sprint(b.keysUsed()); got != "[0 0 0 0 0]" {
		t.Errorf("keys used %s, want the ring's first, then the binding made here", got)
	}
	if n := g.State().Providers[0].AffinityBindings; n != 1 {
		t.Errorf("/admin/state counts %d bindings with the shared state away, want this replica's 1", n)
	}
	select {
	case <-sh.entered: // the first turn's write, held by the gate
	case <-time.After(patience):
		t.Fatal("no write through")
	}
	shutdown()
	if sh.cut.Load() != 1 {
		t.Errorf("%d writes cut off by Shutdown, want the one in flight", sh.cut.Load())
	}
	select {
	case bs := <-sh.binds:
		t.Errorf("a write went through after Shutdown: %v", bs)
	default:
	}
}
