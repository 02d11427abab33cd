package cluster

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"
)

// TestSpendShared: a key's spend counter starts at the first adder's seed, grows by each
// replica's adds after, is read by every replica, keeps periods apart, expires a day after
// its period, and answers ErrUnavailable at once while Redis is away.
func TestSpendShared(t *testing.T) {
	s := startRedis(t)
	a, _ := newEngine(t, s, "a")
	b, _ := newEngine(t, s, "b")
	ctx := context.Background()
	// Today: the counters expire at a time on Redis's clock, so a fixed day would be past.
	day := time.Now().UTC().Truncate(24 * time.Hour)
	p := Period{Key: "alice", Start: day, End: day.AddDate(0, 0, 1)}
	next := Period{Key: "alice", Start: p.End, End: p.End.AddDate(0, 0, 1)}
	steps := []struct {
		e           *Engine
		p           Period
		delta, seed int64
		want        int64
	}{
		{a, p, 10, 250, 250}, // absent: the seed (a's figure, this call included)
		{b, p, 30, 30, 280},  // there: the add
		{a, p, 5, 999, 285},  // a seed is only for a counter not there
		{b, next, 7, 7, 7},   // another period, another counter
	}
	for i, st := range steps {
		if got, err := st.e.AddSpend(ctx, st.p, st.delta, st.seed); err != nil || got != st.want {
			t.Fatalf("step %d: total %d, %v; want %d", i, got, err, st.want)
		}
	}
	other := Period{Key: "bob", Start: day, End: p.End}
	if got, err := b.Spends(ctx, []Period{p, next, other}); err != nil || !reflect.DeepEqual(got, []int64{285, 7, -1}) {
		t.Errorf("spends: %v, %v; want [285 7 -1]", got, err)
	}
	ttl := s.client().PExpireTime(ctx, a.ks.spend(p)).Val()
	if want := time.Duration(p.End.Add(spendKeepsFor).UnixMilli()) * time.Millisecond; ttl != want {
		t.Errorf("the counter expires at %s (Unix), want a day after its period (%s)", ttl, want)
	}
	if _, err := a.AddSpend(ctx, Period{Key: "a b", Start: day, End: p.End}, 1, 1); err == nil {
		t.Error("a key name with a space was taken")
	}
	s.stop()
	eventually(t, 10*time.Second, "a without Redis", func() bool { return !a.Status().Redis })
	began := time.Now()
	if _, err := a.AddSpend(ctx, p, 1, 1); !errors.Is(err, ErrUnavailable) || time.Since(began) > 100*time.Millisecond {
		t.Errorf("AddSpend without Redis: %v after %s, want ErrUnavailable at once", err, time.Since(began))
	}
}
