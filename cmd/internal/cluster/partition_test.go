package cluster

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/actors/replicas"
	"github.com/tollgate/tollgate/cmd/internal/cluster/redistest"
)

// TestShortPartition: one replica is cut off from Redis while the others keep it. For as
// long as its leases are valid it only reuses the slots they cover, so no cap is exceeded
// though the others go on taking shared leases, reclaiming what expires; healed, it
// rejoins.
func TestShortPartition(t *testing.T) {
	s := startRedis(t)
	p := redistest.NewProxy(t, s.addr())
	limits := map[string]int{"gateway": 4, "p/a": 3}
	shapes := [][]string{{"gateway", "p/a"}, {"gateway"}}
	cutOff, _ := newEngine(t, s, "cut", func(o *Options) { o.Addr = p.Addr() })
	r1, _ := newEngine(t, s, "r1")
	r2, _ := newEngine(t, s, "r2")
	others := []*Engine{r1, r2}
	eventually(t, 5*time.Second, "every replica seeing the others", func() bool {
		return cutOff.Status().ReplicasAlive == 3 && r1.Status().ReplicasAlive == 3 && r2.Status().ReplicasAlive == 3
	})
	m := newMeter()
	m.limits = limits
	l := startLoad(append(others, cutOff), m, limits, shapes, 3, 5*time.Millisecond)
	defer l.stop()
	eventually(t, 5*time.Second, "the gateway scope full", func() bool { return m.mostOf("gateway") == limits["gateway"] })
	m.during("the partition")
	p.SetCut(true)
	eventually(t, 5*time.Second, "the cut replica holding", func() bool { return cutOff.Status().Phase == Holding })
	for _, e := range others {
		if ph := e.Status().Phase; ph != Shared {
			t.Errorf("%s: %s while Redis answers it", e.o.Replica, ph)
		}
	}
	work(testTTL / 4)
	m.during("healed")
	p.SetCut(false)
	eventually(t, 5*time.Second, "the cut replica shared again", func() bool { return cutOff.Status().Phase == Shared })
	work(200 * time.Millisecond)
	l.stop()
	m.check(t, limits)
}

// TestPartitionKeepsBucketShare: one replica of two is cut off behind a link that stops
// forwarding. Once its heartbeat is silent it lends tokens on its share of a bucket (half
// the rate and the capacity), and the other's acquires keep that share for it: together
// they take no more than the bucket's rate and one capacity over a window (without the
// share kept, about 1.5 times the rate).
func TestPartitionKeepsBucketShare(t *testing.T) {
	s := startRedis(t)
	p := redistest.NewProxy(t, s.addr())
	long := func(o *Options) { o.MaxRun = 10 * testTTL }
	cut, _ := newEngine(t, s, "cut", long, func(o *Options) { o.Addr = p.Addr() })
	peer, _ := newEngine(t, s, "peer", long)
	eventually(t, 5*time.Second, "both replicas seeing each other", func() bool {
		return cut.Status().ReplicasAlive == 2 && peer.Status().ReplicasAlive == 2
	})
	const perSecond, burst, window = 20, 10, 2 * time.Second
	rpm := replicas.Claim{Buckets: []replicas.Bucket{{Name: "rpm/p", PerMinute: perSecond * 60, Burst: burst, Cost: 1}}}
	p.SetStalled(true)
	first := serveWithinClaim(t, cut, rpm, time.Now(), testTTL+time.Second)
	if first == nil {
		return
	}
	first.Release()
	end := time.Now().Add(window)
	var wg sync.WaitGroup
	counts := make([]int, 2)
	for i, e := range []*Engine{cut, peer} {
		wg.Go(func() { // exits at end
			tick := time.NewTicker(2 * time.Millisecond)
			defer tick.Stop()
			for time.Now().Before(end) {
				if l, err := e.acquireOne(context.Background(), rpm); err == nil {
					if time.Now().Before(end) {
						counts[i]++
					}
					l.Release()
				}
				<-tick.C
			}
		})
	}
	wg.Wait()
	total, most := counts[0]+counts[1], int(window.Seconds())*perSecond+burst+2
	t.Logf("in %s: the cut replica took %d tokens, its peer %d (rate %d/s, burst %d)", window, counts[0], counts[1], perSecond, burst)
	if counts[0] == 0 {
		t.Error("the cut replica lent no token during the partition")
	}
	if total > most {
		t.Errorf("the two replicas took %d tokens in %s, want at most %d (the rate over the window and one burst)", total, window, most)
	}
	p.SetStalled(false)
}

// serveWithinClaim is serveWithin for claim c.
func serveWithinClaim(t *testing.T, e *Engine, c replicas.Claim, since time.Time, d time.Duration) *Lease {
	t.Helper()
	deadline := since.Add(d)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		l, err := e.acquireOne(context.Background(), c)
		if err == nil {
			return l
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: no call served within %s of the loss: %v (%s)", e.o.Replica, d, err, e.Status().Phase)
			return nil
		}
		<-tick.C
	}
}
