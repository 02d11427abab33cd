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

// pair is the two halves wired as the actors wire them, without mailboxes: what one
// admission costs in policy work alone.
type pair struct {
	d       *Dispatcher
	ps      []*Provider
	grant   []Grant
	verdict []Verdict
	acks    []Ack
}

func newPair(l Limits, specs []ProviderSpec) *pair {
	pr := &pair{d: NewDispatcher(l, len(specs))}
	for _, ps := range specs {
		pr.ps = append(pr.ps, NewProvider(ps))
	}
	return pr
}

// offer is provider p's report and the dispatch it triggers; started collects the grants
// used.
func (pr *pair) offer(p int, now time.Time, started func(ID)) {
	pr.d.Report(p, pr.ps[p].Offer(now))
	pr.grant = pr.d.Dispatch(pr.grant[:0])
	pr.verdict = pr.d.Verdicts(pr.verdict[:0])
	pr.acks = pr.d.Acks(pr.acks[:0])
	again := -1
	for _, g := range pr.grant {
		if st, offerAgain, ok := pr.ps[g.Provider].Grant(g, now); ok {
			started(st.ID)
			if offerAgain {
				again = g.Provider
			}
		} else {
			again = g.Provider
		}
	}
	for _, v := range pr.verdict {
		if _, gone := pr.ps[v.Provider].Verdict(v); gone || v.removes() {
			again = v.Provider
		}
	}
	for _, a := range pr.acks {
		if pr.ps[a.Provider].Ack(a) > 0 {
			again = a.Provider
		}
	}
	if again >= 0 {
		pr.offer(again, now, started)
	}
}

// BenchmarkCycle is one request's whole life on an idle gateway: it arrives, is granted and
// starts, finishes, and the freed lanes are reported.
func BenchmarkCycle(b *testing.B) {
	l, specs := benchSpecs()
	pr := newPair(l, specs)
	now := t0
	b.ReportAllocs()
	for i := range b.N {
		id := ID(i + 1)
		p := i % len(specs)
		m := i % len(specs[p].Models)
		now = now.Add(time.Microsecond)
		pr.ps[p].Enter(id, Arrival{Model: m, Class: I}, now)
		started := false
		pr.offer(p, now, func(s ID) { started = started || s == id })
		if !started {
			b.Fatalf("request %d did not start", id)
		}
		pr.ps[p].Finish(id, now)
		pr.offer(p, now, func(ID) {})
	}
}

// BenchmarkQueuedCycle runs a saturated gateway: every lane is busy and every queue holds
// requests of all classes; each iteration one request arrives (and queues), the oldest
// running one finishes, and the grants that follow start the next.
func BenchmarkQueuedCycle(b *testing.B) {
	l := Limits{MaxRunning: 64, MaxAdmitted: 256}
	specs := []ProviderSpec{
		prov("codex", 3, 64, 1, 1, 1),
		prov("nvidia", 4, 64, 2, 2, 2, 2),
		rated(prov("openai", 8, 64, 4, 4, 4), 1_000_000_000, 0),
		prov("lmstudio", 1, 64, 1),
	}
	const depth = 64 // requests kept queued
	pr := newPair(l, specs)
	now := t0
	var next ID
	var running ring // oldest first
	where := map[ID]int{}
	push := func(id ID) { running.push(id) }
	classes := [...]llm.Priority{I, N, B}
	queued := func() int {
		n := 0
		for _, p := range pr.ps {
			n += p.Queued()
		}
		return n
	}
	arrive := func(i int) {
		next++
		p := i % len(specs)
		m := (i / len(specs)) % len(specs[p].Models)
		where[next] = p
		pr.ps[p].Enter(next, Arrival{Model: m, Class: classes[i%3]}, now)
		pr.offer(p, now, push)
	}
	for i := 0; queued() < depth; i++ {
		arrive(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		now = now.Add(time.Microsecond)
		if queued() < depth {
			arrive(i)
		}
		id := running.pop()
		p := where[id]
		delete(where, id)
		if !pr.ps[p].Finish(id, now) {
			b.Fatalf("Finish %d failed", id)
		}
		pr.offer(p, now, push)
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
