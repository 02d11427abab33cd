package cluster

import (
	"testing"
	"time"

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
