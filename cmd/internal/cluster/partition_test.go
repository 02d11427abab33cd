package cluster

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// proxy forwards loopback connections to a Redis until cut: then it drops every
// connection and refuses new ones, as a network partition of the replicas behind it.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]bool
	wg     sync.WaitGroup
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	p.wg.Go(p.accept) // exits when the listener closes
	t.Cleanup(func() {
		_ = ln.Close()
		p.setCut(true)
		p.wg.Wait()
	})
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.conns[c], p.conns[up] = true, true
		p.mu.Unlock()
		for _, pair := range [][2]net.Conn{{c, up}, {up, c}} {
			p.wg.Go(func() { // exits when either side closes
				_, _ = io.Copy(pair[0], pair[1])
				_ = pair[0].Close()
				_ = pair[1].Close()
			})
		}
	}
}

// setCut cuts (dropping every connection) or heals the link.
func (p *proxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			_ = c.Close()
		}
		clear(p.conns)
	}
}

// TestShortPartition: one replica is cut off from Redis while the others keep it. For as
// long as its leases are valid it only reuses the slots they cover, so no cap is exceeded
// though the others go on taking shared leases, reclaiming what expires; healed, it
// rejoins.
func TestShortPartition(t *testing.T) {
	s := startRedis(t)
	p := newProxy(t, s.addr())
	limits := map[string]int{"gateway": 4, "p/a": 3}
	shapes := [][]string{{"gateway", "p/a"}, {"gateway"}}
	cutOff, _ := newEngine(t, s, "cut", func(o *Options) { o.Addr = p.addr() })
	r1, _ := newEngine(t, s, "r1")
	r2, _ := newEngine(t, s, "r2")
	others := []*Engine{r1, r2}
	eventually(t, 5*time.Second, "every replica seeing the others", func() bool {
		return cutOff.Health().ReplicasAlive == 3 && r1.Health().ReplicasAlive == 3 && r2.Health().ReplicasAlive == 3
	})
	m := newMeter()
	m.limits = limits
	l := startLoad(append(others, cutOff), m, limits, shapes, 3, 5*time.Millisecond)
	defer l.stop()
	eventually(t, 5*time.Second, "the gateway scope full", func() bool { return m.mostOf("gateway") == limits["gateway"] })
	m.during("the partition")
	p.setCut(true)
	eventually(t, 5*time.Second, "the cut replica holding", func() bool { return cutOff.Health().Phase == Holding })
	for _, e := range others {
		if ph := e.Health().Phase; ph != Shared {
			t.Errorf("%s: %s while Redis answers it", e.o.Replica, ph)
		}
	}
	work(testTTL / 4)
	m.during("healed")
	p.setCut(false)
	eventually(t, 5*time.Second, "the cut replica shared again", func() bool { return cutOff.Health().Phase == Shared })
	work(200 * time.Millisecond)
	l.stop()
	m.check(t, limits)
}
