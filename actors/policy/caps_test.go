package policy

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// TestClientCapAcrossProviders: a client's max_running holds across providers (the slots
// are shared), its calls wait in their queues while it is at its cap, other clients' calls
// start in the lanes it leaves (work-conserving), and a finish of one of its calls starts
// exactly one more of them, at whichever provider holds one.
func TestClientCapAcrossProviders(t *testing.T) {
	ps := []ProviderSpec{prov("p0", 4, 8, 4), prov("p1", 4, 8, 4)}
	h := newComposed(Limits{MaxRunning: 8, MaxAdmitted: 32}, ps)
	x, y := llm.Client{Name: "x", MaxRunning: 2}, llm.Client{Name: "y"}
	who := map[ID]string{}
	running := map[string]int{}
	var started []ID
	h.onStart = func(_ int, id ID) { started = append(started, id); running[who[id]]++ }
	enter := func(id ID, p int, c llm.Client) {
		t.Helper()
		who[id] = c.Name
		if o, k := h.Enter(id, p, Arrival{Model: 0, Class: llm.Normal, Client: c}, t0); o == Rejected {
			t.Fatalf("enter %d: rejected %v", id, k)
		}
	}
	for id := ID(1); id <= 3; id++ {
		enter(id, 0, x)
	}
	enter(4, 1, x)
	enter(5, 1, x)
	enter(6, 0, y)
	enter(7, 1, y)
	h.Dispatch(t0)
	if running["x"] != 2 || h.slots.Running("x") != 2 {
		t.Fatalf("x runs %d (slots %d), want its max_running 2; started %v", running["x"], h.slots.Running("x"), started)
	}
	if running["y"] != 2 {
		t.Fatalf("y runs %d, want both its calls beside capped x; started %v", running["y"], started)
	}
	for round := range 3 { // x's five calls: two run, three wait, one starts per finish
		var xs ID
		for _, id := range started {
			if who[id] == "x" {
				xs = id
			}
		}
		before := len(started) - 1
		if !h.Finish(xs, t0.Add(time.Duration(round+1)*time.Millisecond)) {
			t.Fatalf("finish %d: not running", xs)
		}
		running["x"]--
		started = slicesDelete(started, xs)
		if got := len(started) - before; got != 1 || running["x"] != 2 {
			t.Fatalf("round %d: finishing x's %d started %d calls, x runs %d; want one, 2", round, xs, got, running["x"])
		}
		if h.gaveBack > 0 {
			t.Logf("round %d: %d grants given back (a capped client's last slot went to another provider)", round, h.gaveBack)
			h.gaveBack = 0
		}
	}
	if q := h.ps[0].Queued() + h.ps[1].Queued(); q != 0 {
		t.Fatalf("%d calls still wait, want none: x's five have all had their turn", q)
	}
}

func slicesDelete(s []ID, id ID) []ID {
	out := s[:0]
	for _, x := range s {
		if x != id {
			out = append(out, x)
		}
	}
	return out
}
