package policy

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// fairRun drives one provider through the composed protocol with a backlog per client:
// every finish starts the next request the policy picks, and starts are counted by client.
type fairRun struct {
	t       *testing.T
	h       *composed
	now     time.Time
	nextID  ID
	client  map[ID]string
	running []ID
	starts  map[string]int
}

func newFairRun(t *testing.T, lanes, maxRunning int, models ...int) *fairRun {
	ps := ProviderSpec{Name: "p", Lanes: lanes, QueueLength: 100000, QueueTimeout: time.Hour}
	for i, n := range models {
		ps.Models = append(ps.Models, ModelSpec{Name: fmt.Sprint("m", i), Lanes: n})
	}
	f := &fairRun{t: t, now: t0, client: map[ID]string{}, starts: map[string]int{}}
	f.h = newComposed(Limits{MaxRunning: maxRunning, MaxAdmitted: 100000}, []ProviderSpec{ps})
	f.h.onStart = func(_ int, id ID) {
		f.running = append(f.running, id)
		f.starts[f.client[id]]++
	}
	return f
}

// enter queues n requests of client c for model m.
func (f *fairRun) enter(c llm.Client, m, n int) {
	for range n {
		f.nextID++
		f.client[f.nextID] = c.Name
		if o, k := f.h.Enter(f.nextID, 0, Arrival{Model: m, Class: llm.Normal, Client: c}, f.now); o == Rejected {
			f.t.Fatalf("enter %d for %q: rejected %v", f.nextID, c.Name, k)
		}
	}
}

// finish ends the running request at index i of those running.
func (f *fairRun) finish(i int) {
	id := f.running[i]
	f.running = append(f.running[:i], f.running[i+1:]...)
	f.now = f.now.Add(time.Millisecond)
	if !f.h.Finish(id, f.now) {
		f.t.Fatalf("finish %d: not running", id)
	}
}

// TestFairShareSplitsByWeight: two clients backlogged at one provider share its starts by
// weight within one start at every moment, whatever order they arrived in, whoever's call
// finishes, and however many lanes there are; the reference model checks the same order
// against every other rule in TestProperties.
func TestFairShareSplitsByWeight(t *testing.T) {
	for seed := range uint64(60) {
		r := rand.New(rand.NewPCG(seed, 24))
		wa, wb := 1+r.IntN(4), 1+r.IntN(4)
		lanes := 1 + r.IntN(5)
		f := newFairRun(t, lanes, 16, lanes)
		a, b := llm.Client{Name: "a", Weight: wa}, llm.Client{Name: "b", Weight: wb}
		// Both backlogged before anything frees: interleaved in random runs.
		for na, nb := 0, 0; na < 400 || nb < 400; {
			if k := 1 + r.IntN(30); r.IntN(2) == 0 && na < 400 {
				f.enter(a, 0, min(k, 400-na))
				na += min(k, 400-na)
			} else if nb < 400 {
				f.enter(b, 0, min(k, 400-nb))
				nb += min(k, 400-nb)
			}
		}
		base := map[string]int{"a": f.starts["a"], "b": f.starts["b"]}
		for range 300 {
			f.finish(r.IntN(len(f.running)))
			sa, sb := f.starts["a"]-base["a"], f.starts["b"]-base["b"]
			// sa should be (sa+sb)·wa/(wa+wb), within one start: |sa·wb - sb·wa| ≤ wa+wb.
			if off := sa*wb - sb*wa; off < -(wa+wb) || off > wa+wb {
				t.Fatalf("seed %d weights %d:%d lanes %d: starts %d:%d after the backlog formed (%+.2f from the share)",
					seed, wa, wb, lanes, sa, sb, float64(off)/float64(wa+wb))
			}
		}
	}
}

// TestFairShareIsWorkConserving: a client with nothing waiting takes nothing; the others use
// every lane (its share too), and one that comes back after being idle gets its share from
// then on, not a catch-up for the time it was away.
func TestFairShareIsWorkConserving(t *testing.T) {
	f := newFairRun(t, 4, 16, 4)
	a, b := llm.Client{Name: "a", Weight: 1}, llm.Client{Name: "b", Weight: 3}
	f.enter(a, 0, 200)
	if len(f.running) != 4 {
		t.Fatalf("a alone runs %d of 4 lanes", len(f.running))
	}
	for range 100 {
		f.finish(0)
		if len(f.running) != 4 {
			t.Fatalf("a alone runs %d of 4 lanes after a finish", len(f.running))
		}
	}
	// b (weight 3, idle so far) comes back with a backlog: it gets 3 of every 4 starts from
	// now on, never all of them to catch up on a's hundred.
	f.enter(b, 0, 100)
	base := map[string]int{"a": f.starts["a"], "b": f.starts["b"]}
	for i := 1; i <= 80; i++ {
		f.finish(0)
		sa, sb := f.starts["a"]-base["a"], f.starts["b"]-base["b"]
		if off := 4*sb - 3*i; off < -4 || off > 4 {
			t.Fatalf("after %d finishes b has %d starts and a %d: want 3 of 4 within one", i, sb, sa)
		}
	}
	// Anonymous calls of one client still come out first come, first served.
	g := newFairRun(t, 1, 16, 1)
	g.enter(llm.Client{}, 0, 5)
	for i := range 4 {
		if g.running[0] != ID(i+1) {
			t.Fatalf("start %d is request %d, want %d", i, g.running[0], i+1)
		}
		g.finish(0)
	}
}

// TestFairShareAcrossModels: with the provider's lanes contended, a client whose requests
// want a model with free lanes still gets its share, and a client held back by its model's
// lanes leaves its share to the other (the split is of starts that could be made).
func TestFairShareAcrossModels(t *testing.T) {
	f := newFairRun(t, 4, 16, 4, 1) // model 1 has one lane
	a, b := llm.Client{Name: "a"}, llm.Client{Name: "b"}
	f.enter(a, 0, 100)
	f.enter(b, 1, 100)
	for range 60 {
		f.finish(0)
	}
	if got := f.h.ps[0].Snapshot().Models[1].Running; got != 1 {
		t.Fatalf("model 1 runs %d, want its one lane", got)
	}
	if got := f.h.ps[0].Snapshot().Running; got != 4 {
		t.Fatalf("the provider runs %d, want all 4 lanes: b's model holds b back, a takes the rest", got)
	}
}
