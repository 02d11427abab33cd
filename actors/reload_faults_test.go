//go:build tollgate_faults

package actors

import (
	"context"
	"testing"

	"github.com/tollgate/tollgate/providers/llm"
)

// A reload whose message crashes the actor handling it is still applied (the strategy sends
// it again; each part carries its whole target), and a crash after a reload rebuilds from
// the settings in force, not from those New was given.
func TestCrashDuringReload(t *testing.T) {
	for _, f := range []Fault{
		{Actor: "supervisor", On: "reconfigure"},
		{Actor: "provider", Provider: "p", On: "reconfigureProvider"},
		{Actor: "provider", Provider: "old", On: "retire"},
	} {
		t.Run(f.Actor+"/"+f.On, func(t *testing.T) {
			ctx := context.Background()
			b, old, added := newHeld(), newHeld(), newHeld()
			p := testProvider("p", b, "m")
			g := newTestGateway(t, 10, 16, p, testProvider("old", old, "m"))
			first := startAsync(ctx, g, "p/m", llm.Interactive)
			c1 := b.next(t)
			queued := startAsync(ctx, g, "p/m", llm.Interactive)
			waitState(t, g, "one queued", func(s AdminState) bool { return s.Queued == 1 })
			if err := g.InjectFault(f); err != nil {
				t.Fatal(err)
			}
			p.Lanes, p.Models[0].Lanes = 3, 3
			ch := reload(t, g, 10, 16, p, testProvider("new", added, "x"))
			if g.FaultsFired() != 1 {
				t.Fatalf("faults fired: %d", g.FaultsFired())
			}
			if len(ch.Added) != 1 || len(ch.Removed) != 1 || len(ch.Changed) != 1 {
				t.Fatalf("changes %+v", ch)
			}
			c2 := b.next(t) // the raised lanes start the queued call
			for _, c := range []*heldCall{c1, c2} {
				close(c.release)
			}
			for _, r := range []chan result{first, queued} {
				res := recv(t, r)
				if res.err != nil {
					t.Fatal(res.err)
				}
				if _, err := drain(t, res.stream); err != nil {
					t.Fatal(err)
				}
			}
			r := startAsync(ctx, g, "new/x", llm.Interactive)
			close(added.next(t).release)
			if _, err := drain(t, recv(t, r).stream); err != nil {
				t.Fatal(err)
			}
			waitState(t, g, "old gone, all idle", func(s AdminState) bool {
				_, listed := providerNamed(s, "old")
				return !listed && idle(s)
			})
		})
	}
}

func TestCrashAfterReloadRebuildsFromSettingsInForce(t *testing.T) {
	ctx := context.Background()
	b := newHeld()
	p := testProvider("p", b, "m")
	g := newTestGateway(t, 10, 16, p)
	p.Lanes, p.Models[0].Lanes = 2, 2
	reload(t, g, 10, 16, p)
	if err := g.InjectFault(Fault{Actor: "provider", Provider: "p", On: "arrive"}); err != nil {
		t.Fatal(err)
	}
	// The arrival that crashes the provider is answered 503; the rebuilt provider has the
	// reloaded two lanes.
	if _, err := g.Start(ctx, "p/m", llm.Interactive, &llm.Request{}); kindOf(t, err) != llm.KindProviderUnavailable {
		t.Fatalf("the call that crashed the provider: %v", err)
	}
	r1, r2 := startAsync(ctx, g, "p/m", llm.Interactive), startAsync(ctx, g, "p/m", llm.Interactive)
	c1, c2 := b.next(t), b.next(t)
	close(c1.release)
	close(c2.release)
	for _, r := range []chan result{r1, r2} {
		if _, err := drain(t, recv(t, r).stream); err != nil {
			t.Fatal(err)
		}
	}
	if st := waitState(t, g, "idle", idle); st.Providers[0].Lanes != 2 {
		t.Fatalf("lanes after the rebuild: %+v", st.Providers[0])
	}
}

// TestCrashWhileAddingBack: a provider added back while it finishes its call, whose actor
// crashes handling that reload, is still one provider once rebuilt: listed once, serving,
// and with lanes 1 a new call waits for the call it ran before its removal.
func TestCrashWhileAddingBack(t *testing.T) {
	ctx := context.Background()
	b, other := newHeld(), newHeld()
	p, q := testProvider("p", b, "m"), testProvider("q", other, "m")
	g := newTestGateway(t, 10, 16, p, q)
	first := startAsync(ctx, g, "p/m", llm.Interactive)
	c1 := b.next(t)
	// Its next reconfigureProvider is the one that adds it back (a removal sends retire).
	if err := g.InjectFault(Fault{Actor: "provider", Provider: "p", On: "reconfigureProvider"}); err != nil {
		t.Fatal(err)
	}
	reload(t, g, 10, 16, q)
	reload(t, g, 10, 16, p, q)
	if g.FaultsFired() != 1 {
		t.Fatalf("faults fired: %d", g.FaultsFired())
	}
	st := waitState(t, g, "p rebuilt and serving", func(s AdminState) bool {
		pv, _ := providerNamed(s, "p")
		return pv.State == "ok"
	})
	if n := countNamed(st, "p"); n != 1 {
		t.Fatalf("p listed %d times after the crash", n)
	}
	second := startAsync(ctx, g, "p/m", llm.Interactive)
	waitState(t, g, "the new call queued", func(s AdminState) bool { return s.Queued == 1 })
	b.noCall(t)
	close(c1.release)
	for _, r := range []chan result{first, second} {
		if r == second {
			close(b.next(t).release)
		}
		res := recv(t, r)
		if res.err != nil {
			t.Fatal(res.err)
		}
		if _, err := drain(t, res.stream); err != nil {
			t.Fatal(err)
		}
	}
	if m := b.max.Load(); m != 1 {
		t.Errorf("the backend saw %d calls at once, lanes 1", m)
	}
}

// TestCrashRepeatedThenReloadRebuilds: a provider taken out of service by a fault that
// repeats is rebuilt by a reload that keeps it, in a new slot with a fresh actor: the
// reload says so, the provider serves again, /admin/state lists it once and OK, and
// OutOfService names nothing. Before, a reload left it out of service until a restart.
func TestCrashRepeatedThenReloadRebuilds(t *testing.T) {
	b, other := newHeld(), newHeld()
	p, q := testProvider("p", b, "m"), testProvider("q", other, "m")
	g := newTestGateway(t, 10, 16, p, q)
	if err := g.InjectFault(Fault{Actor: "provider", Provider: "p", On: "arrive", Times: -1}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; ; i++ {
		if down, _ := g.OutOfService(); len(down) == 1 && down[0] == "p" {
			break
		}
		if i == 20 {
			t.Fatalf("p still in service after %d panics", g.FaultsFired())
		}
		if o := got(t, runCall(ctx, g, "p/m")); o.err == nil || !clean(o.err) {
			t.Fatalf("call %d: %v", i, o.err)
		}
	}
	g.ClearFaults()
	ch, err := g.Reconfigure(ctx, Options{MaxRunning: 10, MaxAdmitted: 16, Providers: []Provider{p, q}})
	if err != nil || len(ch.Rebuilt) != 1 || ch.Rebuilt[0] != "p" || len(ch.Added)+len(ch.Removed)+len(ch.Changed) != 0 {
		t.Fatalf("reload: %+v, %v; want p rebuilt and nothing else", ch, err)
	}
	if down, serving := g.OutOfService(); len(down) != 0 || serving != 2 {
		t.Errorf("after the reload: out of service %v, serving %d", down, serving)
	}
	r := runCall(ctx, g, "p/m")
	close(b.next(t).release)
	if o := got(t, r); o.err != nil {
		t.Fatalf("p after the rebuild: %v", o.err)
	}
	st := waitState(t, g, "p listed once", func(s AdminState) bool {
		n := 0
		for _, pv := range s.Providers {
			if pv.Name == "p" {
				n++
			}
		}
		return n == 1 && idle(s)
	})
	for _, pv := range st.Providers {
		if pv.State != "ok" {
			t.Errorf("provider %s is %s after the rebuild", pv.Name, pv.State)
		}
	}
}
