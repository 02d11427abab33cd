//go:build tollgate_faults

package actors

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// TestCrashOutOfService crashes a provider in its out-of-service mode on each message a
// test can make it handle there: an arrival that raced its leaving service, the ending of a
// call it stopped, a read of /admin/state, adding a model and a drain. The loss is made good
// as in service (loss.go), the provider stays out of service with no call counted running,
// and the other provider serves. The types it also receives there (grants, resync,
// laneReport, recall, offerDue, reserve, settle, reconfigureProvider, retire, retireCheck,
// unleased, retryAsk) are checked through their lost method only.
func TestCrashOutOfService(t *testing.T) {
	for _, on := range []string{"arrive", "freed", "stateQuery", "addModel", "drainAll"} {
		t.Run(on, func(t *testing.T) {
			b, other := newHeld(), newHeld()
			// Not newTestGateway: the drain case shuts the gateway down, and only once.
			g, err := New(Options{MaxRunning: 10, MaxAdmitted: 16, Logger: zerolog.Nop(),
				Providers: []Provider{testProvider("p", b, "m"), testProvider("q", other, "m")}})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			t.Cleanup(func() { _ = g.Shutdown(ctx) })
			running := runCall(ctx, g, "p/m")
			c := b.next(t)
			if err := g.InjectFault(Fault{Actor: "provider_out_of_service", On: on}); err != nil {
				t.Fatal(err)
			}
			pid := g.slots.at(0).pid.Load()
			send(g.system.Root, pid, &failNow{})
			if o := got(t, running); o.err == nil || !clean(o.err) {
				t.Errorf("the call the provider stopped ended with %v, want a clean error", o.err)
			}
			<-c.ctx.Done()
			switch on {
			case "arrive":
				m, answered := callSample(func(c *call) *arrive { return &arrive{c: c} })()
				send(g.system.Root, pid, m)
				waitFired(t, g, 1)
				// The fault fires before the panic reaches the strategy that answers it.
				for deadline := time.Now().Add(patience); !answered(); {
					if time.Now().After(deadline) {
						t.Fatal("the arrival lost in the crash was not answered")
					}
					time.Sleep(time.Millisecond) // polling with a deadline
				}
			case "stateQuery":
				g.State()
			case "addModel":
				if err := g.AddModels("p", []Model{{Name: "x", Lanes: 1}}); err == nil {
					t.Error("a model was added to a provider out of service")
				}
			case "drainAll":
				sctx, cancel := context.WithTimeout(ctx, patience)
				defer cancel()
				if err := g.Shutdown(sctx); err != nil {
					t.Errorf("the drain did not end: %v", err)
				}
			}
			waitFired(t, g, 1)
			if on == "drainAll" {
				return
			}
			waitState(t, g, "p out of service, nothing running", func(s AdminState) bool {
				p, ok := providerNamed(s, "p")
				return ok && p.State == "out_of_service" && idle(s)
			})
			r := runCall(ctx, g, "q/m")
			close(other.next(t).release)
			if o := got(t, r); o.err != nil {
				t.Errorf("the other provider after the crash: %v", o.err)
			}
		})
	}
}

// TestCrashRebuilding crashes a provider in its rebuilding mode (after a first crash, while
// a lane's report is held back) on each message a call, its ending, a read of
// /admin/state, adding a model or another replica's notice makes it handle there. The loss
// is made good, the provider rebuilds again, and once the report comes every client is
// answered and the gateway serves at full capacity. The types it also receives there
// (withdraw, resync, grants, recall, offerDue, unleased, retryAsk, reserve, settle,
// reconfigureProvider, retire, retireCheck, drainAll, failNow, lanesPublished,
// breakerShared) are checked through their lost method only, or, for laneReport, by
// TestCrashEveryMessageType.
func TestCrashRebuilding(t *testing.T) {
	for _, tc := range []struct{ on, trigger string }{
		{"arrive", "arrival"}, {"freed", "release"}, {"stateQuery", "state"}, {"addModel", "add"},
		{"keyCooled", "cooled"}, {"lanesShared", "learned"}, {"readShared", "read"},
	} {
		t.Run(tc.on, func(t *testing.T) {
			b := newHeld()
			p := testProvider("p", b, "m", "n")
			p.Lanes, p.Keys = 2, 1
			g := newTestGateway(t, 10, 16, p)
			ctx := context.Background()
			first := runCall(ctx, g, "p/m")
			c1 := b.next(t)
			waiting := runCall(ctx, g, "p/m")
			waitState(t, g, "one waiting", func(s AdminState) bool { return s.Queued == 1 })
			hold := make(chan struct{})
			released := false
			release := func() {
				if !released {
					released = true
					close(hold)
				}
			}
			defer release()
			for _, f := range []Fault{
				{Actor: "lane", Provider: "p", Model: "n", On: "reportRunning", Hold: hold},
				{Actor: "provider", Provider: "p", On: "stateQuery"},
			} {
				if err := g.InjectFault(f); err != nil {
					t.Fatal(err)
				}
			}
			g.State() // the first crash: the provider rebuilds, lane n's report held back
			waitFired(t, g, 1)
			if err := g.InjectFault(Fault{Actor: "provider_rebuilding", Provider: "p", On: tc.on}); err != nil {
				t.Fatal(err)
			}
			extra := pull(t, g, tc.trigger, c1, func() {})
			waitFired(t, g, 2)
			release()
			stop := autoRelease(b)
			if tc.trigger != "release" {
				close(c1.release)
			}
			for _, ch := range []chan outcome{first, waiting, extra} {
				if ch == nil {
					continue
				}
				if o := got(t, ch); o.err != nil && (tc.on != "arrive" || ch != extra || !clean(o.err)) {
					t.Errorf("a call after a crash while rebuilding: %v", o.err)
				}
			}
			stop()
			fullCapacity(t, g, b)
			if m := b.max.Load(); m > 2 {
				t.Errorf("the backend saw %d calls at once with 2 lanes", m)
			}
		})
	}
}
