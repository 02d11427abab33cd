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
	return newFairRunOf(t, newComposed(Limits{MaxRunning: maxRunning, MaxAdmitted: 100000}, []ProviderSpec{ps}))
}

// newGatewayRun is a fairRun over several providers under one max_running, with standing
// credit on or off: provider i has lanes[i] lanes and one model that may use them all.
func newGatewayRun(t *testing.T, credit bool, maxRunning int, lanes ...int) *fairRun {
	var specs []ProviderSpec
	for i, n := range lanes {
		specs = append(specs, ProviderSpec{Name: fmt.Sprint("p", i), Lanes: n, QueueLength: 100000, QueueTimeout: time.Hour,
			Models: []ModelSpec{{Name: fmt.Sprintf("p%d-m0", i), Lanes: n}}})
	}
	l := Limits{MaxRunning: maxRunning, MaxAdmitted: 100000}
	if credit {
		return newFairRunOf(t, newCreditComposed(l, specs))
	}
	return newFairRunOf(t, newComposed(l, specs))
}

func newFairRunOf(t *testing.T, h *composed) *fairRun {
	f := &fairRun{t: t, h: h, now: t0, client: map[ID]string{}, starts: map[string]int{}}
	f.h.onStart = func(_ int, id ID) {
		f.running = append(f.running, id)
		f.starts[f.client[id]]++
	}
	return f
}

// enter queues n requests of client c for model m of provider 0.
func (f *fairRun) enter(c llm.Client, m, n int) { f.enterAt(c, 0, m, n) }

// enterAt queues n requests of client c for model m of provider p.
func (f *fairRun) enterAt(c llm.Client, p, m, n int) {
	for range n {
		f.nextID++
		f.client[f.nextID] = c.Name
		if o, k := f.h.Enter(f.nextID, p, Arrival{Model: m, Class: llm.Normal, Client: c}, f.now); o == Rejected {
			f.t.Fatalf("enter %d for %q at p%d: rejected %v", f.nextID, c.Name, p, k)
		}
	}
}

// since is each client's starts since base.
func (f *fairRun) since(base map[string]int) map[string]int {
	out := map[string]int{}
	for c, n := range f.starts {
		out[c] = n - base[c]
	}
	return out
}

// fairErr says how starts sa and sb of clients weighted wa and wb miss their split by
// weight by more than one start (|sa·wb − sb·wa| > wa+wb), or "".
func fairErr(sa, sb, wa, wb int) string {
	if off := sa*wb - sb*wa; off < -(wa+wb) || off > wa+wb {
		return fmt.Sprintf("starts %d:%d for weights %d:%d (%+.2f starts from the share)", sa, sb, wa, wb, float64(off)/float64(wa+wb))
	}
	return ""
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

// TestFairShareAtMaxRunning: when the gateway's max_running is what holds calls back, keys
// waiting at different providers share its starts by weight within one start at every
// moment, as keys waiting at one provider share its lanes. The providers taking turns
// regardless of whom their starts serve split them 1:1 instead.
func TestFairShareAtMaxRunning(t *testing.T) {
	type backlog struct {
		c    llm.Client
		p, n int
	}
	a3, b1 := llm.Client{Name: "a", Weight: 3}, llm.Client{Name: "b", Weight: 1}
	for _, tc := range []struct {
		name       string
		credit     bool
		maxRunning int
		lanes      []int
		backlogs   []backlog
	}{
		{"weights 3:1 at two providers", false, 4, []int{8, 8}, []backlog{{a3, 0, 300}, {b1, 1, 300}}},
		{"weights 3:1, the heavier key at the later provider", false, 4, []int{8, 8}, []backlog{{b1, 0, 300}, {a3, 1, 300}}},
		{"weights 3:1 with standing credit", true, 4, []int{8, 8}, []backlog{{a3, 0, 300}, {b1, 1, 300}}},
		{"equal weights", false, 3, []int{4, 4}, []backlog{{llm.Client{Name: "a"}, 0, 300}, {llm.Client{Name: "b"}, 1, 300}}},
		{"a key without a weight counts as weight 1", false, 5, []int{5, 5},
			[]backlog{{llm.Client{Name: "a"}, 0, 300}, {llm.Client{Name: "b", Weight: 2}, 1, 300}}},
		{"three keys 1:2:3 at three providers", false, 6, []int{6, 6, 6},
			[]backlog{{llm.Client{Name: "a", Weight: 1}, 0, 300}, {llm.Client{Name: "b", Weight: 2}, 1, 300}, {llm.Client{Name: "c", Weight: 3}, 2, 300}}},
		{"one cap's slot, weights 4:1", false, 1, []int{2, 2}, []backlog{{llm.Client{Name: "a", Weight: 4}, 0, 300}, {b1, 1, 300}}},
		{"two keys at one provider, one at another", false, 4, []int{8, 8},
			[]backlog{{a3, 0, 300}, {llm.Client{Name: "c", Weight: 2}, 0, 300}, {b1, 1, 300}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newGatewayRun(t, tc.credit, tc.maxRunning, tc.lanes...)
			for _, b := range tc.backlogs {
				f.enterAt(b.c, b.p, 0, b.n)
			}
			base := f.since(nil)
			for i := 1; i <= 200; i++ {
				f.finish(0)
				if len(f.running) != tc.maxRunning {
					t.Fatalf("finish %d: %d running, want max_running %d", i, len(f.running), tc.maxRunning)
				}
				got := f.since(base)
				for x, a := range tc.backlogs {
					for _, b := range tc.backlogs[x+1:] {
						if err := fairErr(got[a.c.Name], got[b.c.Name], a.c.Share(), b.c.Share()); err != "" {
							t.Fatalf("after %d finishes, %q and %q: %s (all: %v)", i, a.c.Name, b.c.Name, err, got)
						}
					}
				}
			}
		})
	}
}

// TestFairShareAtMaxRunningIsWorkConserving: a key with nothing waiting takes none of
// max_running; the others use all of it; and a key that comes back after being idle gets
// its share from then on, not a catch-up for the time it was away, with or without
// standing credit.
func TestFairShareAtMaxRunningIsWorkConserving(t *testing.T) {
	for _, credit := range []bool{false, true} {
		t.Run(fmt.Sprint("credit ", credit), func(t *testing.T) {
			f := newGatewayRun(t, credit, 4, 8, 8)
			a, b := llm.Client{Name: "a", Weight: 1}, llm.Client{Name: "b", Weight: 3}
			f.enterAt(a, 0, 0, 300)
			for i := range 100 {
				f.finish(0)
				if len(f.running) != 4 {
					t.Fatalf("a alone runs %d of max_running 4 after %d finishes", len(f.running), i+1)
				}
			}
			f.enterAt(b, 1, 0, 40)
			base := f.since(nil)
			for i := 1; len(f.since(base)) < 2 || f.since(base)["b"] < 40; i++ {
				f.finish(0)
				if len(f.running) != 4 {
					t.Fatalf("%d running after %d finishes, want max_running 4", len(f.running), i)
				}
				if got := f.since(base); got["b"] < 40 {
					if err := fairErr(got["a"], got["b"], 1, 3); err != "" {
						t.Fatalf("after b came back, %d finishes: %s", i, err)
					}
				}
			}
			// b's backlog is gone: a takes the whole cap again.
			for i := range 20 {
				f.finish(0)
				if len(f.running) != 4 {
					t.Fatalf("a alone again runs %d of 4 after %d finishes", len(f.running), i+1)
				}
			}
		})
	}
}

// TestFairShareAtMaxRunningRandom: over random weights, providers, caps, arrival orders and
// finishes, with standing credit on and off, two keys backlogged at different providers
// share max_running by weight within one start at every moment, while a third provider's
// occasional calls of another key take their turn (a key's calls queued behind another's at
// their provider wait that one start more: the provider's own order comes first).
func TestFairShareAtMaxRunningRandom(t *testing.T) {
	seeds := uint64(120)
	if testing.Short() {
		seeds = 30
	}
	for seed := range seeds {
		r := rand.New(rand.NewPCG(seed, 0xfa1e))
		maxRunning := 1 + r.IntN(6)
		np := 2 + r.IntN(2)
		lanes := make([]int, np)
		for i := range lanes {
			lanes[i] = 2*maxRunning + r.IntN(3) // the cap, not the lanes, holds the keys back
		}
		credit := r.IntN(2) == 0
		f := newGatewayRun(t, credit, maxRunning, lanes...)
		a, b := llm.Client{Name: "a", Weight: r.IntN(5)}, llm.Client{Name: "b", Weight: r.IntN(5)}
		pa := r.IntN(np)
		pb := (pa + 1 + r.IntN(np-1)) % np
		for na, nb := 0, 0; na < 400 || nb < 400; {
			if k := 1 + r.IntN(30); r.IntN(2) == 0 && na < 400 {
				f.enterAt(a, pa, 0, min(k, 400-na))
				na += min(k, 400-na)
			} else if nb < 400 {
				f.enterAt(b, pb, 0, min(k, 400-nb))
				nb += min(k, 400-nb)
			}
		}
		base := f.since(nil)
		for i := 1; i <= 250; i++ {
			if po := 3 - pa - pb; np == 3 && r.IntN(10) == 0 {
				f.enterAt(llm.Client{Name: "other"}, po, 0, 1)
			}
			f.finish(r.IntN(len(f.running)))
			got := f.since(base)
			if err := fairErr(got["a"], got["b"], a.Share(), b.Share()); err != "" {
				t.Fatalf("seed %d (max_running %d, lanes %v, a at p%d, b at p%d, credit %v): after %d finishes: %s",
					seed, maxRunning, lanes, pa, pb, credit, i, err)
			}
		}
	}
}

// TestFairShareAtMaxRunningSurvivesRebuilds: the shares are the gateway's, not the
// dispatcher's or a provider's, so a dispatcher rebuilt after a crash (which forgets every
// provider) and a provider rebuilt from its facts leave the split by weight within one start.
func TestFairShareAtMaxRunningSurvivesRebuilds(t *testing.T) {
	for _, credit := range []bool{false, true} {
		t.Run(fmt.Sprint("credit ", credit), func(t *testing.T) {
			f := newGatewayRun(t, credit, 4, 8, 8)
			a, b := llm.Client{Name: "a", Weight: 3}, llm.Client{Name: "b", Weight: 1}
			f.enterAt(a, 0, 0, 300)
			f.enterAt(b, 1, 0, 300)
			base := f.since(nil)
			for i := 1; i <= 200; i++ {
				switch i {
				case 50, 150:
					f.h.rebuildDispatcher()
					f.h.deliver(f.now)
				case 100:
					f.h.rebuildProvider(0, f.now)
					f.h.deliver(f.now)
				case 120:
					f.h.rebuildProvider(1, f.now)
					f.h.deliver(f.now)
				}
				f.finish(0)
				if len(f.running) != 4 {
					t.Fatalf("finish %d: %d running, want max_running 4", i, len(f.running))
				}
				got := f.since(base)
				if err := fairErr(got["a"], got["b"], 3, 1); err != "" {
					t.Fatalf("after %d finishes: %s", i, err)
				}
			}
		})
	}
}
