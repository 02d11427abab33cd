package actors

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tollgate/tollgate/actors/policy/health"
	"github.com/tollgate/tollgate/actors/policy/keys"
	"github.com/tollgate/tollgate/providers/llm"
)

// reload applies opts' providers with the caps given, failing the test on an error.
func reload(t *testing.T, g *Gateway, maxRunning, maxAdmitted int, ps ...Provider) Changes {
	t.Helper()
	ch, err := g.Reconfigure(context.Background(), Options{MaxRunning: maxRunning, MaxAdmitted: maxAdmitted, Providers: ps})
	if err != nil {
		t.Fatalf("reconfigure: %v", err)
	}
	return ch
}

// actorCount is how many actors the gateway's system has once each provider in service has
// started: a provider spawns its lanes in its Started, after newGateway returns, and State
// asks each provider, which it answers only after that.
func actorCount(g *Gateway) int {
	g.State()
	n := 0
	for _, m := range g.system.ProcessRegistry.LocalPIDs.LocalPIDs {
		n += m.Count()
	}
	return n
}

func providerNamed(st AdminState, name string) (ProviderState, bool) {
	for _, p := range st.Providers {
		if p.Name == name {
			return p, true
		}
	}
	return ProviderState{}, false
}

func TestReloadLanesLoweredBindAsCallsEnd(t *testing.T) {
	ctx := context.Background()
	b := newHeld()
	p := testProvider("p", b, "m")
	p.Lanes, p.Models[0].Lanes = 2, 2
	g := newTestGateway(t, 10, 16, p)
	r1 := startAsync(ctx, g, "p/m", llm.Interactive)
	c1 := b.next(t)
	r2 := startAsync(ctx, g, "p/m", llm.Interactive)
	c2 := b.next(t)

	p.Lanes, p.Models[0].Lanes = 1, 1
	ch := reload(t, g, 10, 16, p)
	if !slices.Equal(ch.Changed, []string{"p"}) || len(ch.Added)+len(ch.Removed) != 0 {
		t.Fatalf("changes %+v", ch)
	}
	r3 := startAsync(ctx, g, "p/m", llm.Interactive)
	waitState(t, g, "one queued behind two running", func(s AdminState) bool { return s.Running == 2 && s.Queued == 1 })
	// Both running calls go on; the first to end frees a lane that the new setting no
	// longer has.
	close(c1.release)
	if _, err := drain(t, recv(t, r1).stream); err != nil {
		t.Fatal(err)
	}
	waitState(t, g, "one running, one still queued", func(s AdminState) bool { return s.Running == 1 && s.Queued == 1 })
	b.noCall(t)
	close(c2.release)
	if _, err := drain(t, recv(t, r2).stream); err != nil {
		t.Fatal(err)
	}
	c3 := b.next(t)
	if b.max.Load() > 2 {
		t.Errorf("backend saw %d at once", b.max.Load())
	}

	// Raised: a queued call starts at once.
	r4 := startAsync(ctx, g, "p/m", llm.Interactive)
	waitState(t, g, "one queued", func(s AdminState) bool { return s.Queued == 1 })
	p.Lanes, p.Models[0].Lanes = 3, 3
	reload(t, g, 10, 16, p)
	c4 := b.next(t)
	close(c3.release)
	close(c4.release)
	for _, r := range []chan result{r3, r4} {
		if _, err := drain(t, recv(t, r).stream); err != nil {
			t.Fatal(err)
		}
	}
	st := waitState(t, g, "idle", idle)
	if st.Providers[0].Lanes != 3 || st.Providers[0].Models[0].ModelLanes != 3 {
		t.Errorf("state after raise: %+v", st.Providers[0])
	}
}

func TestReloadQueueLengthLoweredEvictsNobody(t *testing.T) {
	ctx := context.Background()
	b := newHeld()
	p := testProvider("p", b, "m")
	p.QueueLength = 3
	g := newTestGateway(t, 10, 16, p)
	run := startAsync(ctx, g, "p/m", llm.Interactive)
	first := b.next(t)
	var queued []chan result
	for range 3 {
		queued = append(queued, startAsync(ctx, g, "p/m", llm.Interactive))
		n := len(queued)
		// Admitted: kept by the dispatcher's verdict. One still awaiting it when the reload
		// lands is judged against the lowered queue_length, as any arrival then is.
		waitState(t, g, "queued in order", func(s AdminState) bool {
			return s.Queued == n && s.Providers[0].AwaitingVerdict == 0
		})
	}
	p.QueueLength, p.QueueTimeout = 1, 30*time.Second
	reload(t, g, 10, 16, p)
	if st := g.State(); st.Queued != 3 || st.Providers[0].QueueLength != 1 {
		t.Fatalf("after lowering: %+v", st.Providers[0])
	}
	if _, err := g.Start(ctx, "p/m", llm.Interactive, &llm.Request{}); kindOf(t, err) != llm.KindQueueFull {
		t.Fatalf("a new arrival over the lowered queue: %v", err)
	}
	// The queued calls start in their order, each as the one before ends.
	close(first.release)
	if _, err := drain(t, recv(t, run).stream); err != nil {
		t.Fatal(err)
	}
	for i, q := range queued {
		c := b.next(t)
		r := recv(t, q) // the one lane is its: the calls behind it are still queued
		if r.err != nil {
			t.Fatalf("queued call %d: %v", i, r.err)
		}
		for _, later := range queued[i+1:] {
			select {
			case r := <-later:
				t.Fatalf("a call behind queued call %d started first: %+v", i, r)
			default:
			}
		}
		close(c.release)
		if _, err := drain(t, r.stream); err != nil {
			t.Fatal(err)
		}
	}
	waitState(t, g, "idle", idle)
}

func TestReloadRemovedProviderFinishesRunningAndQueued(t *testing.T) {
	ctx := context.Background()
	old, stay := newHeld(), newHeld()
	g := newTestGateway(t, 10, 16, testProvider("old", old, "m"), testProvider("stay", stay, "m"))
	before := actorCount(g)
	run := startAsync(ctx, g, "old/m", llm.Interactive)
	c1 := old.next(t)
	q1, q2 := startAsync(ctx, g, "old/m", llm.Interactive), startAsync(ctx, g, "old/m", llm.Normal)
	waitState(t, g, "two queued", func(s AdminState) bool { return s.Queued == 2 })

	ch := reload(t, g, 10, 16, testProvider("stay", stay, "m"))
	if !slices.Equal(ch.Removed, []string{"old"}) {
		t.Fatalf("changes %+v", ch)
	}
	if _, err := g.Start(ctx, "old/m", llm.Interactive, &llm.Request{}); kindOf(t, err) != llm.KindModelNotFound {
		t.Fatalf("a new call for a removed provider: %v", err)
	}
	for _, c := range g.Models() {
		if c.ID == "old/m" {
			t.Fatal("the removed model is still listed")
		}
	}
	if p, ok := providerNamed(g.State(), "old"); !ok || p.State != "retiring" || p.Running != 1 || p.Queued != 2 {
		t.Fatalf("the removed provider's state: %+v (listed %v)", p, ok)
	}
	close(c1.release)
	for _, r := range []chan result{run, q1, q2} {
		if r != run {
			close(old.next(t).release)
		}
		res := recv(t, r)
		if res.err != nil {
			t.Fatalf("an admitted call of the removed provider: %v", res.err)
		}
		if _, err := drain(t, res.stream); err != nil {
			t.Fatal(err)
		}
	}
	waitState(t, g, "the removed provider gone from the state", func(s AdminState) bool {
		_, listed := providerNamed(s, "old")
		return !listed && idle(s)
	})
	// Its provider actor and its lane stopped.
	deadline := time.Now().Add(patience)
	for actorCount(g) != before-2 {
		if time.Now().After(deadline) {
			t.Fatalf("actors: %d before, %d after the removed provider stopped (want %d)", before, actorCount(g), before-2)
		}
		time.Sleep(time.Millisecond) // polling with a deadline
	}
	// The rest serves as before.
	r := startAsync(ctx, g, "stay/m", llm.Interactive)
	close(stay.next(t).release)
	if _, err := drain(t, recv(t, r).stream); err != nil {
		t.Fatal(err)
	}
}

func TestReloadAddsProvidersModelsAndRemovesModels(t *testing.T) {
	ctx := context.Background()
	a, b := newHeld(), newHeld()
	pa := testProvider("a", a, "m1", "m2")
	pa.Lanes = 2
	g := newTestGateway(t, 10, 16, pa)
	run := startAsync(ctx, g, "a/m2", llm.Interactive)
	c := a.next(t)

	pa = testProvider("a", a, "m1", "m3") // m2 removed while it runs, m3 added
	pa.Lanes = 2
	pa.Models[1].Aliases = []string{"three"}
	ch := reload(t, g, 10, 16, pa, testProvider("b", b, "x"))
	if !slices.Equal(ch.Added, []string{"b"}) || !slices.Equal(ch.Changed, []string{"a"}) {
		t.Fatalf("changes %+v", ch)
	}
	var ids []string
	for _, card := range g.Models() {
		ids = append(ids, card.ID)
	}
	if !slices.Equal(ids, []string{"a/m1", "a/m3", "b/x"}) {
		t.Fatalf("models after the reload: %v", ids)
	}
	if _, err := g.Start(ctx, "a/m2", llm.Interactive, &llm.Request{}); kindOf(t, err) != llm.KindModelNotFound {
		t.Fatalf("the removed model: %v", err)
	}
	for _, id := range []string{"three", "b/x"} {
		r := startAsync(ctx, g, id, llm.Interactive)
		bk := a
		if id == "b/x" {
			bk = b
		}
		call := bk.next(t)
		close(call.release)
		if _, err := drain(t, recv(t, r).stream); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
	before := actorCount(g)
	close(c.release)
	if _, err := drain(t, recv(t, run).stream); err != nil {
		t.Fatalf("the removed model's running call: %v", err)
	}
	st := waitState(t, g, "idle", idle)
	// The removed model's lane stops once its call is done, with its request actor.
	deadline := time.Now().Add(patience)
	for actorCount(g) != before-2 {
		if time.Now().After(deadline) {
			t.Fatalf("actors: %d before the removed model's call ended, %d after (want %d)", before, actorCount(g), before-2)
		}
		time.Sleep(time.Millisecond) // polling with a deadline
	}
	if p, _ := providerNamed(st, "a"); len(p.Models) != 3 {
		t.Errorf("provider a's models by index: %+v", p.Models)
	}
}

func TestReloadCapsLoweredAndRaised(t *testing.T) {
	ctx := context.Background()
	a, b := newHeld(), newHeld()
	pa, pb := testProvider("a", a, "m"), testProvider("b", b, "m")
	g := newTestGateway(t, 2, 16, pa, pb)
	ra := startAsync(ctx, g, "a/m", llm.Interactive)
	ca := a.next(t)
	rb := startAsync(ctx, g, "b/m", llm.Interactive)
	cb := b.next(t)

	reload(t, g, 1, 2, pa, pb)
	if st := g.State(); st.MaxRunning != 1 || st.MaxAdmitted != 2 {
		t.Fatalf("caps in state: %+v", st)
	}
	// running + queued is 2 = max_admitted: a third is refused.
	if _, err := g.Start(ctx, "a/m", llm.Interactive, &llm.Request{}); kindOf(t, err) != llm.KindOverloaded {
		t.Fatalf("over the lowered max_admitted: %v", err)
	}
	close(ca.release)
	if _, err := drain(t, recv(t, ra).stream); err != nil {
		t.Fatal(err)
	}
	waitState(t, g, "one running", func(s AdminState) bool { return s.Running == 1 && s.Queued == 0 })
	// max_running 1 is reached by b's call: a new call for a waits although a is free.
	rq := startAsync(ctx, g, "a/m", llm.Interactive)
	waitState(t, g, "a's call queued behind max_running", func(s AdminState) bool { return s.Queued == 1 })
	a.noCall(t)
	reload(t, g, 2, 16, pa, pb)
	cq := a.next(t)
	close(cb.release)
	close(cq.release)
	for _, r := range []chan result{rb, rq} {
		if _, err := drain(t, recv(t, r).stream); err != nil {
			t.Fatal(err)
		}
	}
	waitState(t, g, "idle", idle)
}

func TestReloadInvalidChangesNothing(t *testing.T) {
	g := newTestGateway(t, 4, 8, testProvider("p", newHeld(), "m"))
	bad := testProvider("p", newHeld(), "m")
	bad.Lanes = 0
	_, err := g.Reconfigure(context.Background(), Options{MaxRunning: 4, MaxAdmitted: 2, Providers: []Provider{bad}})
	if err == nil {
		t.Fatal("an invalid reload was applied")
	}
	st := g.State()
	if st.MaxRunning != 4 || st.MaxAdmitted != 8 || st.Providers[0].Lanes != 1 {
		t.Fatalf("state changed by an invalid reload: %+v", st)
	}
}

func TestReloadKeysCarryCooldowns(t *testing.T) {
	now := time.Unix(1000, 0)
	pv := Provider{Name: "p", Lanes: 2, Keys: 2, KeyIDs: []string{"a", "b"}}
	h := health.New(healthSpec(pv, nil), now)
	h.Ring(0).RateLimited(0, time.Minute, now)                 // key a cools for a minute
	h.Ring(0).Refused(1, -1, keys.WholeKey, "401", false, now) // key b is refused

	pv.Keys, pv.KeyIDs = 3, []string{"c", "a", "b"}
	if whole, pairs := h.Reconfigure(healthSpec(pv, nil), now.Add(time.Second)); whole != 1 || pairs != 0 {
		t.Errorf("the reload restored %d keys and %d pairs, want 1 and 0", whole, pairs)
	}
	at := now.Add(2 * time.Second)
	ring := h.Ring(0)
	if got := []string{ring.State(0, -1, at).String(), ring.State(1, -1, at).String(), ring.State(2, -1, at).String()}; !slices.Equal(got, []string{"ready", "cooling", "ready"}) {
		t.Fatalf("keys after the reload (c new, a cooling kept, b refused before: a reload restores it): %v", got)
	}
	if end, _ := ring.ReadyAt(1, -1); !end.Equal(now.Add(time.Minute)) {
		t.Errorf("a's cooldown ends at %v, want %v", end, now.Add(time.Minute))
	}
	same := h.Ring(0)
	h.Reconfigure(healthSpec(pv, nil), at)
	if h.Ring(0) != same {
		t.Error("a reload that changes no key made a new ring")
	}
}

// A lowered max_running binds the next start even when the provider held standing credit
// handed out under the old cap: the credit is back before the reload is acknowledged (the
// supervisor recalls it, and the provider's own reconfigure offers, which gives it back), so
// a call sent after the reload queues instead of starting on the old credit.
func TestReloadRecallsCredit(t *testing.T) {
	b := newHeld()
	p := testProvider("p", b, "m")
	p.Lanes, p.Models[0].Lanes = 4, 4
	g := newTestGateway(t, 4, 16, p)
	ctx := context.Background()
	first := startAsync(ctx, g, "p/m", llm.Normal) // its grants message gives credit for 4
	c1 := b.next(t)
	reload(t, g, 1, 16, p)
	second := startAsync(ctx, g, "p/m", llm.Normal)
	waitState(t, g, "the second call waiting", func(s AdminState) bool { return s.Queued == 1 })
	b.noCall(t)
	if st := g.State(); st.Running != 1 {
		t.Fatalf("running %d with max_running 1", st.Running)
	}
	close(c1.release)
	for _, ch := range []chan result{first, second} {
		if ch == second {
			close(b.next(t).release)
		}
		r := recv(t, ch)
		if r.err != nil {
			t.Fatal(r.err)
		}
		if _, err := drain(t, r.stream); err != nil {
			t.Fatal(err)
		}
	}
	waitState(t, g, "idle", idle)
}
