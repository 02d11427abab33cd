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
