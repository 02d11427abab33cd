package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tollgate/tollgate/actors/replicas"
)

// TestBucketShared: a bucket's burst is shared by replicas, the refusal says how long
// until the tokens are there, and a refund (Adjust) gives tokens back.
func TestBucketShared(t *testing.T) {
	s := startRedis(t)
	a, _ := newEngine(t, s, "a")
	b, _ := newEngine(t, s, "b")
	ctx := context.Background()
	rpm := replicas.Bucket{Name: "rpm/p", PerMinute: 60, Burst: 2, Cost: 1} // one a second after a burst of 2
	c := replicas.Claim{Buckets: []replicas.Bucket{rpm}}
	mustAcquire(t, a, ctx, c).Release()
	mustAcquire(t, b, ctx, c).Release()
	_, err := a.acquireOne(ctx, c)
	var busy *replicas.Busy
	if !errors.As(err, &busy) || busy.Bucket != "rpm/p" || busy.Wait <= 0 || busy.Wait > time.Second {
		t.Fatalf("third request within the burst of 2: %v", err)
	}
	// A tpm bucket charged more than its capacity waits for a full bucket, then goes into
	// debt; a refund pays it back.
	tpm := replicas.Bucket{Name: "tpm/p", PerMinute: 6000, Cost: 5000} // capacity 1000, 100 a second
	mustAcquire(t, a, ctx, replicas.Claim{Buckets: []replicas.Bucket{tpm}}).Release()
	small := tpm
	small.Cost = 10
	if _, err := b.acquireOne(ctx, replicas.Claim{Buckets: []replicas.Bucket{small}}); !errors.As(err, &busy) || busy.Wait < 30*time.Second {
		t.Fatalf("after a 5000-token charge on a 1000-token bucket: %v, want a wait of about 40 s", err)
	}
	if err := a.Adjust(ctx, tpm, -5000); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, b, ctx, replicas.Claim{Buckets: []replicas.Bucket{small}})
}

// TestCooldownShared: a key cooled on one replica is cooling on the other at once, and a
// shorter cooldown never shortens it.
func TestCooldownShared(t *testing.T) {
	s := startRedis(t)
	a, _ := newEngine(t, s, "a")
	b, bev := newEngine(t, s, "b")
	ctx := context.Background()
	left, err := a.Cool(ctx, "key/deepseek/0", 3*time.Second)
	if err != nil || left != 3*time.Second {
		t.Fatalf("cool: %s, %v", left, err)
	}
	eventually(t, 5*time.Second, "b told of the cooldown", func() bool {
		return bev.has(func(e Event) bool {
			return e.Kind == Cooled && e.Name == "key/deepseek/0" && e.Replica == "a" && e.For == 3*time.Second
		})
	})
	if left, err := b.Cool(ctx, "key/deepseek/0", time.Second); err != nil || left < 2*time.Second {
		t.Errorf("a shorter cooldown: %s left, %v; want the longer one kept", left, err)
	}
	got, err := b.Cooldowns(ctx, []string{"key/deepseek/0", "key/deepseek/1"})
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := got["key/deepseek/0"]; !ok || d < 2*time.Second || d > 3*time.Second {
		t.Errorf("b sees %v", got)
	}
	if _, ok := got["key/deepseek/1"]; ok {
		t.Errorf("a key never cooled is cooling: %v", got)
	}
	if _, err := a.Cool(ctx, "k", 0); err == nil {
		t.Error("a cooldown of 0 accepted")
	}
}

// TestLearnedLanesShared: lanes learned on one replica reach the other, and growth is a
// compare-and-set: a cut always lands, a rise only over the value its replica last saw.
func TestLearnedLanesShared(t *testing.T) {
	s := startRedis(t)
	a, _ := newEngine(t, s, "a")
	b, bev := newEngine(t, s, "b")
	ctx := context.Background()
	learn := func(e *Engine, lanes, was, want int) {
		t.Helper()
		got, err := e.Learn(ctx, "provider/nvidia", lanes, was)
		if err != nil || got != want {
			t.Fatalf("Learn(%d, was %d) = %d, %v; want %d stored", lanes, was, got, err, want)
		}
	}
	learn(a, 8, 0, 8) // nothing stored: taken
	eventually(t, 5*time.Second, "b told of the learned lanes", func() bool {
		return bev.has(func(e Event) bool { return e.Kind == Learned && e.Name == "provider/nvidia" && e.Lanes == 8 })
	})
	learn(b, 7, 8, 7) // b cuts
	learn(a, 4, 8, 4) // a halves, not having heard of b's cut: lower always lands
	learn(b, 8, 7, 4) // b probes up over the 7 it stored: refused, 4 is what it adopts
	learn(a, 5, 4, 5) // a grows over what it stored: taken
	learn(a, 5, 4, 5) // the same again: nothing to change
	got, err := b.Learned(ctx, []string{"provider/nvidia", "provider/other"})
	if err != nil || len(got) != 1 || got["provider/nvidia"] != 5 {
		t.Errorf("learned %v, %v", got, err)
	}
	if _, err := a.Learn(ctx, "provider/nvidia", 0, 5); err == nil {
		t.Error("0 lanes accepted")
	}
}

// TestOutageShares: while Redis is away, shared state is unavailable (the caller's local
// rule stands), a bucket runs on its share, starting empty, and the tokens it lent are
// charged to the shared bucket when Redis returns.
func TestOutageShares(t *testing.T) {
	s := startRedis(t)
	a, _ := newEngine(t, s, "a")
	newEngine(t, s, "b")
	eventually(t, 5*time.Second, "a seeing b", func() bool { return a.Status().ReplicasAlive == 2 })
	ctx := context.Background()
	s.stop()
	eventually(t, 10*time.Second, "a on its shares", func() bool { return a.Status().Phase == Alone })
	if _, err := a.Cool(ctx, "k", time.Second); !errors.Is(err, ErrUnavailable) {
		t.Errorf("cool while away: %v", err)
	}
	// 120 a minute, burst 20: the share is 60 a minute (one a second), burst 10, empty.
	rpm := replicas.Claim{Buckets: []replicas.Bucket{{Name: "rpm/q", PerMinute: 120, Burst: 20, Cost: 1}}}
	var busy *replicas.Busy
	if _, err := a.acquireOne(ctx, rpm); !errors.As(err, &busy) || busy.Phase != Alone.String() || busy.Wait > time.Second {
		t.Fatalf("the share starts empty: %v", err)
	}
	eventually(t, 5*time.Second, "a token from the share", func() bool {
		l, err := a.acquireOne(ctx, rpm)
		if err == nil {
			l.Release()
		}
		return err == nil
	})
	s.start()
	eventually(t, 10*time.Second, "a shared again", func() bool { return a.Status().Phase == Shared })
	// The shared bucket came back without its history (a restart) but was charged with what
	// the share had not refilled: no full burst of 20 right after the switch.
	got := 0
	for range 20 {
		if l, err := a.acquireOne(ctx, rpm); err == nil {
			l.Release()
			got++
		}
	}
	if got >= 15 {
		t.Errorf("the shared bucket let %d of a burst of 20 through right after the switch", got)
	}
	t.Logf("%d of a burst of 20 right after the switch", got)
}

// TestResubscribedTold: when only the pub/sub connection drops (Redis answers throughout),
// go-redis subscribes again and the engine tells it as Resubscribed, once per drop, so the
// gateway reads what was announced meanwhile; the subscription at the start is not told.
func TestResubscribedTold(t *testing.T) {
	s := startRedis(t)
	a, aev := newEngine(t, s, "a")
	ctx := context.Background()
	// The subscription is live once a's own notice comes back through it.
	if _, err := a.Cool(ctx, "k", time.Second); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "a hearing its own notice", func() bool {
		return aev.has(func(e Event) bool { return e.Kind == Cooled && e.Name == "k" })
	})
	if aev.has(func(e Event) bool { return e.Kind == Resubscribed }) {
		t.Fatal("the first subscription told as a resubscription")
	}
	rdb := s.client()
	t.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "a told it subscribed again", func() bool {
		return aev.has(func(e Event) bool { return e.Kind == Resubscribed && e.Replica == "a" })
	})
	if p := a.Status().Phase; p != Shared {
		t.Errorf("phase %v after only the subscription dropped, want Shared", p)
	}
}
