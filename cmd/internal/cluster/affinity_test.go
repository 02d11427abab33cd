package cluster

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/actors/replicas"
)

// TestAffinityShared: a binding one replica makes is the other's at once, with its age; a
// later bind moves it; it expires its TTL after its last bind; the table holds at most Max,
// the least recently bound going; both keys expire a TTL after the last bind; a stored
// binding no replica wrote is an error, not a binding.
func TestAffinityShared(t *testing.T) {
	s := startRedis(t)
	a, _ := newEngine(t, s, "a")
	b, _ := newEngine(t, s, "b")
	ctx := context.Background()
	rule := replicas.Affinity{TTL: time.Hour, Max: 3}
	conv := replicas.AffinityScope("conversation one")
	bound := func(e *Engine, name string) (replicas.Binding, time.Duration, bool) {
		t.Helper()
		got, age, ok, err := e.Bound(ctx, name, rule)
		if err != nil {
			t.Fatalf("bound %s: %v", name, err)
		}
		return got, age, ok
	}
	if _, _, ok := bound(b, conv); ok {
		t.Fatal("a conversation never bound has a binding")
	}
	one := replicas.Binding{Name: conv, Provider: "p", Key: 2, Model: "p/m"}
	if err := a.Bind(ctx, []replicas.Binding{one}, rule); err != nil {
		t.Fatal(err)
	}
	if got, age, ok := bound(b, conv); !ok || got != one || age < 0 || age > time.Second {
		t.Fatalf("b reads %+v (age %s, %v), want %+v just bound", got, age, ok, one)
	}
	moved := replicas.Binding{Name: conv, Provider: "q", Key: 0, Model: "q/m"}
	if err := b.Bind(ctx, []replicas.Binding{moved}, rule); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := bound(a, conv); got != moved {
		t.Fatalf("after b moved it, a reads %+v, want %+v", got, moved)
	}

	// The cap: five conversations bound in turn, three kept, the last three.
	rdb := s.client()
	for i := range 5 {
		bi := replicas.Binding{Name: replicas.AffinityScope(fmt.Sprint(i)), Provider: "p", Model: "p/m", Key: i}
		if err := a.Bind(ctx, []replicas.Binding{bi}, rule); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		if _, _, ok := bound(b, replicas.AffinityScope(fmt.Sprint(i))); ok != (i >= 2) {
			t.Errorf("conversation %d bound %v after five binds with Max 3", i, ok)
		}
	}
	if n, m := rdb.HLen(ctx, a.ks.affinity()).Val(), rdb.ZCard(ctx, a.ks.affinityUsed()).Val(); n != 3 || m != 3 {
		t.Errorf("Redis holds %d bindings and %d times, want 3 and 3", n, m)
	}
	for _, k := range []string{a.ks.affinity(), a.ks.affinityUsed()} {
		if d := rdb.PTTL(ctx, k).Val(); d <= 59*time.Minute || d > time.Hour {
			t.Errorf("%s expires in %s, want the rule's TTL (1h)", k, d)
		}
	}

	// The TTL counts from the last bind, on Redis's clock; what expired is forgotten by
	// the next bind.
	short := replicas.Affinity{TTL: 300 * time.Millisecond, Max: 3}
	two := replicas.AffinityScope("conversation two")
	if err := a.Bind(ctx, []replicas.Binding{{Name: two, Provider: "p", Model: "p/m"}}, short); err != nil {
		t.Fatal(err)
	}
	if _, _, ok, err := b.Bound(ctx, two, short); !ok || err != nil {
		t.Fatalf("just bound: %v, %v", ok, err)
	}
	eventually(t, 5*time.Second, "the binding expired 300ms after its bind", func() bool {
		_, _, ok, err := b.Bound(ctx, two, short)
		return !ok && err == nil
	})
	if err := a.Bind(ctx, []replicas.Binding{{Name: conv, Provider: "p", Model: "p/m"}}, short); err != nil {
		t.Fatal(err)
	}
	if rdb.HExists(ctx, a.ks.affinity(), two).Val() {
		t.Error("an expired binding is still held after the next bind")
	}

	rdb.HSet(ctx, a.ks.affinity(), conv, `{"p":"","k":-1}`)
	if _, _, ok, err := b.Bound(ctx, conv, short); ok || !errors.Is(err, errBadBinding) {
		t.Errorf("a binding no replica wrote: ok %v, err %v; want errBadBinding", ok, err)
	}
}

// TestAffinityBadInput: a name that is no binding name, a rule without TTL or Max, and too
// many bindings at once are refused without a round trip.
func TestAffinityBadInput(t *testing.T) {
	s := startRedis(t)
	e, _ := newEngine(t, s, "a")
	ctx := context.Background()
	rule := replicas.Affinity{TTL: time.Minute, Max: 10}
	if _, _, _, err := e.Bound(ctx, "", rule); err == nil {
		t.Error("an empty name accepted")
	}
	if _, _, _, err := e.Bound(ctx, "x", replicas.Affinity{TTL: time.Minute}); err == nil {
		t.Error("a rule of Max 0 accepted")
	}
	if err := e.Bind(ctx, []replicas.Binding{{Name: "x", Provider: "", Model: "m"}}, rule); err == nil {
		t.Error("a binding without its provider accepted")
	}
	if err := e.Bind(ctx, make([]replicas.Binding, replicas.MaxBind+1), rule); err == nil {
		t.Error("more than MaxBind bindings in one call accepted")
	}
	if err := e.Bind(ctx, nil, replicas.Affinity{}); err != nil {
		t.Errorf("nothing to bind: %v", err)
	}
}

// TestAffinityRedisAway: a Redis that does not answer costs a lookup at most the engine's
// round-trip bound, and once the engine knows it is away nothing at all.
func TestAffinityRedisAway(t *testing.T) {
	s := startRedis(t)
	e, _ := newEngine(t, s, "a")
	ctx := context.Background()
	rule := replicas.Affinity{TTL: time.Minute, Max: 10}
	name := replicas.AffinityScope("c")
	if err := e.Bind(ctx, []replicas.Binding{{Name: name, Provider: "p", Model: "p/m"}}, rule); err != nil {
		t.Fatal(err)
	}
	s.pause()
	t.Cleanup(s.resume)
	began := time.Now()
	if _, _, ok, err := e.Bound(ctx, name, rule); ok || err == nil {
		t.Fatalf("a paused Redis answered: %v, %v", ok, err)
	}
	if d := time.Since(began); d > e.t.op+500*time.Millisecond {
		t.Errorf("a lookup on a paused Redis took %s, the round-trip bound is %s", d, e.t.op)
	}
	eventually(t, 5*time.Second, "the engine knowing Redis away", func() bool { return !e.Status().Redis })
	began = time.Now()
	if _, _, _, err := e.Bound(ctx, name, rule); !errors.Is(err, ErrUnavailable) {
		t.Errorf("a lookup while away: %v, want ErrUnavailable", err)
	}
	if err := e.Bind(ctx, []replicas.Binding{{Name: name, Provider: "p", Model: "p/m"}}, rule); !errors.Is(err, ErrUnavailable) {
		t.Errorf("a bind while away: %v, want ErrUnavailable", err)
	}
	if d := time.Since(began); d > 50*time.Millisecond {
		t.Errorf("a lookup and a bind while away took %s: they should not wait", d)
	}
}

// TestAffinityCounted: each provider's bindings are counted cluster-wide, whichever replica
// made them: a binding that moves counts at its new provider only, one trimmed beyond Max
// or expired counts nowhere, and a provider nobody is bound to counts 0.
func TestAffinityCounted(t *testing.T) {
	s := startRedis(t)
	a, _ := newEngine(t, s, "a")
	b, _ := newEngine(t, s, "b")
	ctx := context.Background()
	rule := replicas.Affinity{TTL: time.Hour, Max: 3}
	conv := func(i int) string { return replicas.AffinityScope(fmt.Sprint("conversation ", i)) }
	bind := func(e *Engine, i int, provider string) {
		t.Helper()
		if err := e.Bind(ctx, []replicas.Binding{{Name: conv(i), Provider: provider, Model: provider + "/m"}}, rule); err != nil {
			t.Fatal(err)
		}
	}
	counts := func(r replicas.Affinity) string {
		t.Helper()
		n, err := b.Bindings(ctx, []string{"p", "q", "r"}, r)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("p %d, q %d, r %d", n["p"], n["q"], n["r"])
	}
	bind(a, 1, "p")
	bind(a, 2, "p")
	bind(b, 3, "q")
	if got := counts(rule); got != "p 2, q 1, r 0" {
		t.Errorf("three bound: %s", got)
	}
	bind(b, 1, "q") // moved
	if got := counts(rule); got != "p 1, q 2, r 0" {
		t.Errorf("one moved from p to q: %s", got)
	}
	bind(a, 4, "r") // beyond Max 3: conversation 2, the least recently bound, goes
	if got := counts(rule); got != "p 0, q 2, r 1" {
		t.Errorf("a fourth bound with Max 3: %s", got)
	}
	// One last bound long ago (1 µs after the epoch) is not live.
	if err := s.client().ZAdd(ctx, a.ks.affinityAt()+"r", redis.Z{Score: 1, Member: conv(5)}).Err(); err != nil {
		t.Fatal(err)
	}
	if got := counts(rule); got != "p 0, q 2, r 1" {
		t.Errorf("with an expired entry in r's set: %s", got)
	}
	if _, err := b.Bindings(ctx, []string{""}, rule); err == nil {
		t.Error("an empty provider name was counted")
	}
}
