package policy

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// benchSpecs is a gateway of the SPEC's default shape: a few providers, some rate-limited,
// several models each.
func benchSpecs() (Limits, []ProviderSpec) {
	specs := []ProviderSpec{
		prov("codex", 3, 8, 1, 1, 1),
		prov("nvidia", 4, 8, 2, 2, 2, 2),
		rated(prov("openai", 8, 8, 4, 4, 4), 1_000_000_000, 0),
		prov("lmstudio", 1, 8, 1),
	}
	return Limits{MaxRunning: 10, MaxAdmitted: 16}, specs
}

// BenchmarkCycle is one request's whole life on an idle gate: Arrive starts it, Finish
// releases it, Dispatch finds nothing to start.
func BenchmarkCycle(b *testing.B) {
	l, specs := benchSpecs()
	g := New(l, specs)
	buf := make([]ID, 0, 16)
	now := t0
	b.ReportAllocs()
	for i := range b.N {
		id := ID(i + 1)
		p := i % len(specs)
		m := i % len(specs[p].Models)
		now = now.Add(time.Microsecond)
		if o, _ := g.Arrive(id, p, m, I, now); o != Started {
			b.Fatalf("Arrive %d = %v", id, o)
		}
		g.Finish(id, now)
		buf = g.Dispatch(now, buf[:0])
	}
}

// BenchmarkQueuedCycle runs a saturated gate: every lane is busy and every queue holds
// requests of all classes; each iteration one request arrives (and queues), the oldest
// running one finishes, and Dispatch starts the next.
func BenchmarkQueuedCycle(b *testing.B) {
	l := Limits{MaxRunning: 64, MaxAdmitted: 256}
	specs := []ProviderSpec{
		prov("codex", 3, 64, 1, 1, 1),
		prov("nvidia", 4, 64, 2, 2, 2, 2),
		rated(prov("openai", 8, 64, 4, 4, 4), 1_000_000_000, 0),
		prov("lmstudio", 1, 64, 1),
	}
	const depth = 64 // requests kept queued
	g := New(l, specs)
	now := t0
	var next ID
	var running ring // oldest first
	buf := make([]ID, 0, 64)
	classes := [...]llm.Priority{I, N, B}
	arrive := func(i int) {
		next++
		p := i % len(specs)
		m := (i / len(specs)) % len(specs[p].Models)
		switch o, k := g.Arrive(next, p, m, classes[i%3], now); o {
		case Started:
			running.push(next)
		case Rejected:
			b.Fatalf("Arrive %d rejected: %v", next, k)
		}
	}
	for i := 0; g.Queued() < depth; i++ {
		arrive(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		now = now.Add(time.Microsecond)
		if g.Queued() < depth {
			arrive(i)
		}
		if id := running.pop(); !g.Finish(id, now) {
			b.Fatalf("Finish %d failed", id)
		}
		buf = g.Dispatch(now, buf[:0])
		for _, id := range buf {
			running.push(id)
		}
	}
}

// ring is a FIFO of ids without allocation, big enough for every lane.
type ring struct {
	ids        [64]ID
	head, size int
}

func (r *ring) push(id ID) {
	r.ids[(r.head+r.size)%len(r.ids)] = id
	r.size++
}

func (r *ring) pop() ID {
	id := r.ids[r.head]
	r.head = (r.head + 1) % len(r.ids)
	r.size--
	return id
}
