//go:build tollgate_faults

package actors

import (
	"context"
	"testing"

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
				if !answered() {
					t.Error("the arrival lost in the crash was not answered")
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
