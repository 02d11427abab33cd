package redistest

import (
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy forwards loopback connections to a Redis until cut: then it drops every
// connection and refuses new ones, as a network partition of the replicas behind it
// (their Redis address is the proxy's) while the others still reach Redis. It can also
// stall (keep every connection open and forward nothing, as a partition that drops
// packets: nothing fails until a timeout) and delay what it forwards (a slow link).
type Proxy struct {
	ln      net.Listener
	target  string
	mu      sync.Mutex
	cut     bool
	stalled bool
	resumed chan struct{} // closed when a stall ends
	delay   time.Duration
	conns   map[net.Conn]bool
	wg      sync.WaitGroup
}

// NewProxy starts a proxy to target, closed when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	p.wg.Go(p.accept) // exits when the listener closes
	t.Cleanup(func() {
		_ = ln.Close()
		p.SetCut(true)
		p.wg.Wait()
	})
	return p
}

// Addr is the address to give the replicas behind the proxy.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) accept() {
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
			p.wg.Go(func() { p.forward(pair[0], pair[1]) })
		}
	}
}

// chunk is what one read got, and when it may be written on (its read time + delay).
type chunk struct {
	b   []byte
	due time.Time
}

// forward copies from src to dst, each chunk after the proxy's delay and never while
// stalled. It returns, closing both, when either side fails or closes; its reader
// goroutine ends with it.
func (p *Proxy) forward(dst, src net.Conn) {
	defer func() { _ = dst.Close(); _ = src.Close() }()
	q := make(chan chunk, 64)
	p.wg.Go(func() { // exits when src fails or closes (forward closes it when it returns)
		defer close(q)
		for {
			b := make([]byte, 32<<10)
			n, err := src.Read(b)
			if n > 0 {
				p.mu.Lock()
				d := p.delay
				p.mu.Unlock()
				q <- chunk{b: b[:n], due: time.Now().Add(d)}
			}
			if err != nil {
				return
			}
		}
	})
	for c := range q {
		if d := time.Until(c.due); d > 0 {
			time.Sleep(d) // the link's latency: this is the behaviour, not a wait for an event
		}
		for p.waitStall() {
		}
		if _, err := dst.Write(c.b); err != nil {
			_ = src.Close()
			for range q { // let the reader finish
			}
			return
		}
	}
}

// waitStall waits out a stall in force; it reports whether it waited (then the caller
// looks again).
func (p *Proxy) waitStall() bool {
	p.mu.Lock()
	if !p.stalled {
		p.mu.Unlock()
		return false
	}
	ch := p.resumed
	p.mu.Unlock()
	<-ch
	return true
}

// SetStalled stops forwarding (connections stay open, nothing passes) or resumes it.
// Cutting the link ends a stall.
func (p *Proxy) SetStalled(stalled bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case stalled && !p.stalled:
		p.stalled, p.resumed = true, make(chan struct{})
	case !stalled && p.stalled:
		p.stalled = false
		close(p.resumed)
	}
}

// SetDelay makes every chunk forwarded from now on wait d (each way).
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// SetCut cuts (dropping every connection) or heals the link.
func (p *Proxy) SetCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut && p.stalled {
		p.stalled = false
		close(p.resumed)
	}
	if cut {
		for c := range p.conns {
			_ = c.Close()
		}
		clear(p.conns)
	}
}
