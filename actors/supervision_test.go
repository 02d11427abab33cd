//go:build tollgate_faults

package actors

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/actors/replicas"
	"github.com/tollgate/tollgate/providers/llm"
)

// Supervision under injected panics (run with -tags tollgate_faults, as make test does).
// Each case crashes one actor kind while it handles one kind of message, with a call
// running and one waiting, and checks the promise of supervision: every client gets an
// answer or a clean error, no lane is leaked (the gateway ends idle and serves at full
// capacity again), caps are never exceeded, and the calls that did not carry the fault are
// not disturbed.

// outcome is one background Start's end: its text, or its error.
type outcome struct {
	text string
	err  error
}

// runCall starts a call in the background and reads it to its end.
func runCall(ctx context.Context, g *Gateway, model string) chan outcome {
	out := make(chan outcome, 1)
	go func() { // ends when the call has ended
		sv, err := g.Start(ctx, model, llm.Interactive, &llm.Request{Model: model})
		if err != nil {
			out <- outcome{err: err}
			return
		}
		var text string
		for {
			ch, err := sv.Stream.Next()
			if err != nil {
				sv.Stream.Close()
				if err == io.EOF {
					err = nil
				}
				out <- outcome{text: text, err: err}
				return
			}
			text += ch.Content
		}
	}()
	return out
}

func got(t *testing.T, ch chan outcome) outcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(5 * time.Second):
		t.Fatal("a client got no answer within 5s")
		return outcome{}
	}
}

// clean reports whether err is an answer a client can act on: nil, or a gateway error of a
// known kind (never a hang, never a raw internal error).
func clean(err error) bool {
	var e *llm.Error
	return err == nil || errors.As(err, &e)
}

func TestCrashOnce(t *testing.T) {
	cases := []struct {
		fault Fault
		// hit is what makes the actor handle the message the fault is for, after a call
		// runs and one waits; it returns what it started, if anything.
		trigger string
	}{
		{Fault{Actor: "provider", On: "arrive"}, "arrival"},
		{Fault{Actor: "provider", On: "grants"}, "release"},
		{Fault{Actor: "provider", On: "freed"}, "release"},
		{Fault{Actor: "provider", On: "withdraw"}, "withdraw"},
		{Fault{Actor: "lane", On: "startCall"}, "release"},
		{Fault{Actor: "lane", On: "released"}, "release"},
		{Fault{Actor: "request", On: "clientGone"}, "hangup"},
		{Fault{Actor: "supervisor", On: "offer"}, "release"},
		{Fault{Actor: "supervisor", On: "dispatchNow"}, "arrival"},
	}
	for _, tc := range cases {
		t.Run(tc.fault.Actor+"/"+tc.fault.On, func(t *testing.T) { crashAndRecover(t, tc.fault, tc.trigger) })
	}
}

// crashAndRecover crashes an actor on a message, with a call running and one waiting, and
// checks that every client is answered and the gateway ends idle at full capacity. The
// faults in before are injected first and fire on the way (a rebuild's messages follow a
// crash). trigger makes the actor handle the message: "arrival" (a call to a free model),
// "withdraw" (a waiting client leaves), "release" (the running call ends), "hangup" (the
// running call's client leaves), "state" (/admin/state is read), "add" (a model is added),
// or what another replica tells: "cooled" (a key cooled), "learned" (the provider's lanes)
// or "read" (read the shared state again).
func crashAndRecover(t *testing.T, fault Fault, trigger string, before ...Fault) {
	b := newHeld()
	p := testProvider("p", b, "m", "n")
	p.Lanes = 2
	g := newTestGateway(t, 10, 16, p)
	ctx := context.Background()
	hangup, hang := context.WithCancel(ctx)
	defer hang()
	first := runCall(hangup, g, "p/m")
	c1 := b.next(t)
	waiting := runCall(ctx, g, "p/m")
	waitState(t, g, "one waiting", func(s AdminState) bool { return s.Queued == 1 })
	lane := fault.Actor == "lane"
	for _, f := range append(before, fault) {
		if err := g.InjectFault(f); err != nil {
			t.Fatal(err)
		}
		lane = lane || f.Actor == "lane"
	}
	extra := pull(t, g, trigger, c1, hang)
	waitFired(t, g, len(before)+1)
	// From here on every call the backend sees is released at once.
	stop := autoRelease(b)
	if trigger != "release" {
		close(c1.release)
	}
	// Every call ends with an answer or a clean error; the first and the waiting one
	// are served unless they carried the fault.
	o1 := got(t, first)
	if !clean(o1.err) && !errors.Is(o1.err, context.Canceled) {
		t.Errorf("running call: %v", o1.err)
	}
	if trigger != "hangup" && o1.err != nil {
		t.Errorf("the running call was disturbed by a fault elsewhere: %v", o1.err)
	}
	if extra != nil {
		if o := got(t, extra); !clean(o.err) && !errors.Is(o.err, context.Canceled) {
			t.Errorf("extra call: %v", o.err)
		}
	}
	if o := got(t, waiting); !lane && o.err != nil || !clean(o.err) {
		t.Errorf("the waiting call: %v", o.err)
	}
	stop()
	fullCapacity(t, g, b)
	if m := b.max.Load(); m > 2 {
		t.Errorf("the backend saw %d calls at once with 2 lanes", m)
	}
}

// pull makes the gateway handle what trigger names (see crashAndRecover) and returns the
// call it started, if any. c1 is the running call, hang its client's hang-up.
func pull(t *testing.T, g *Gateway, trigger string, c1 *heldCall, hang func()) (extra chan outcome) {
	ctx := context.Background()
	switch trigger {
	case "arrival":
		extra = runCall(ctx, g, "p/n") // a free model: it would start at once
	case "withdraw":
		wctx, wcancel := context.WithCancel(ctx)
		extra = runCall(wctx, g, "p/m")
		waitState(t, g, "two waiting", func(s AdminState) bool { return s.Queued == 2 })
		wcancel()
	case "release":
		close(c1.release)
	case "hangup":
		hang()
	case "state":
		if st := g.State(); len(st.Providers) != 1 || st.Providers[0].State != "restarting" {
			t.Errorf("/admin/state during the crash: %+v, want provider p restarting", st.Providers)
		}
	case "cooled":
		g.Cooled(replicas.KeyScope("p", 0, 0), 10*time.Millisecond)
	case "learned":
		g.LanesLearned(replicas.ProviderScope("p"), 2, "r2")
	case "read":
		g.ReadShared()
	case "add":
		if err := g.AddModels("p", []Model{{Name: "x", Lanes: 1}}); err == nil || !strings.Contains(err.Error(), "internal fault") {
			t.Errorf("adding a model during the crash: %v, want the internal fault", err)
		}
	}
	return extra
}

// autoRelease releases every call the backend sees until the returned stop is called.
func autoRelease(b *heldBackend) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() { // exits at stop
		defer close(done)
		for {
			select {
			case c := <-b.opened:
				close(c.release)
			case <-quit:
				return
			}
		}
	}()
	return func() { close(quit); <-done }
}

// waitFired waits until n injected panics have fired.
func waitFired(t *testing.T, g *Gateway, n int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for g.FaultsFired() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d injected panics fired", g.FaultsFired(), n)
		}
		time.Sleep(time.Millisecond) // polling with a deadline
	}
}

// fullCapacity checks that the gateway ends idle and then runs both models at once.
func fullCapacity(t *testing.T, g *Gateway, b *heldBackend) {
	t.Helper()
	waitState(t, g, "idle", idle)
	ctx := context.Background()
	r3, r4 := runCall(ctx, g, "p/m"), runCall(ctx, g, "p/n")
	c3, c4 := b.next(t), b.next(t)
	close(c3.release)
	close(c4.release)
	for _, r := range []chan outcome{r3, r4} {
		if o := got(t, r); o.err != nil {
			t.Errorf("after the fault: %v", o.err)
		}
	}
	waitState(t, g, "idle", idle)
}

func TestRepeatedCrashTakesProviderOutOfService(t *testing.T) {
	for _, f := range []Fault{
		{Actor: "provider", Provider: "p", On: "arrive", Times: -1},
		{Actor: "lane", Provider: "p", On: "startCall", Times: -1},
	} {
		t.Run(f.Actor, func(t *testing.T) {
			b, other := newHeld(), newHeld()
			g := newTestGateway(t, 10, 16, testProvider("p", b, "m"), testProvider("q", other, "m"))
			if err := g.InjectFault(f); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			var last error
			for i := range 20 {
				o := got(t, runCall(ctx, g, "p/m"))
				if o.err == nil || !clean(o.err) {
					t.Fatalf("call %d: %v", i, o.err)
				}
				last = o.err
				if g.slots.at(0).down.Load() {
					break
				}
			}
			if !g.slots.at(0).down.Load() {
				t.Fatalf("the provider is still in service after %d panics", g.FaultsFired())
			}
			if fired := g.FaultsFired(); fired > laneBudget.max+2 && fired > providerBudget.max+2 {
				t.Errorf("%d panics: the budget did not stop the loop", fired)
			}
			// Out of service: answered at once, 503 provider_unavailable; the other provider
			// keeps serving.
			o := got(t, runCall(ctx, g, "p/m"))
			if k := kindOf(t, o.err); k != llm.KindProviderUnavailable {
				t.Fatalf("after the budget: %v (last before it: %v)", o.err, last)
			}
			r := runCall(ctx, g, "q/m")
			close(other.next(t).release)
			if o := got(t, r); o.err != nil {
				t.Fatalf("the other provider: %v", o.err)
			}
			st := g.State()
			if st.Providers[0].State != "out_of_service" || st.Providers[1].State != "ok" {
				t.Errorf("state: %+v", st.Providers)
			}
			waitState(t, g, "idle", idle)
		})
	}
}

func TestRepeatedSupervisorCrashFailsTheGateway(t *testing.T) {
	b := newHeld()
	g := newTestGateway(t, 10, 16, testProvider("p", b, "m"))
	ctx := context.Background()
	running := runCall(ctx, g, "p/m")
	c := b.next(t)
	if err := g.InjectFault(Fault{Actor: "supervisor", Times: -1}); err != nil {
		t.Fatal(err)
	}
	for i := 0; g.Failed() == nil; i++ {
		if i == 50 {
			t.Fatalf("the gateway has not failed after %d supervisor panics", g.FaultsFired())
		}
		o := got(t, runCall(ctx, g, "p/m"))
		if !clean(o.err) {
			t.Fatalf("call %d: %v", i, o.err)
		}
	}
	select {
	case <-g.FailedC():
	default:
		t.Fatal("FailedC not closed")
	}
	// Everything is answered: new calls at once, the running one is stopped.
	if o := got(t, runCall(ctx, g, "p/m")); kindOf(t, o.err) != llm.KindDraining {
		t.Fatalf("after the gateway failed: %v", o.err)
	}
	select {
	case <-c.ctx.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("the running backend was not stopped")
	}
	if o := got(t, running); o.err == nil || !clean(o.err) {
		t.Fatalf("running call: %v", o.err)
	}
	waitState(t, g, "idle", idle)
	if fired := g.FaultsFired(); fired > 2*(supervisorBudget.max+1)+10 {
		t.Errorf("%d panics: the budget did not stop the loop", fired)
	}
}

// TestCrashBatch crashes each actor on each message of a batch's admission: the batch is
// refused cleanly or runs (a member may fail alone when its lane crashed), nothing of it is
// left holding a lane or a global slot, and the next batch runs whole.
func TestCrashBatch(t *testing.T) {
	for _, f := range []Fault{
		{Actor: "supervisor", On: "startBatch"},
		{Actor: "supervisor", On: "reserved"},
		{Actor: "provider", Provider: "p", On: "reserve"},
		{Actor: "provider", Provider: "q", On: "reserve"},
		{Actor: "provider", Provider: "p", On: "settle"},
		{Actor: "lane", Provider: "q", On: "startCall"},
	} {
		t.Run(f.Actor+"/"+f.Provider+"/"+f.On, func(t *testing.T) {
			b := newHeld()
			p, q := testProvider("p", b, "m"), testProvider("q", b, "n")
			g := newTestGateway(t, 10, 16, p, q)
			if err := g.InjectFault(f); err != nil {
				t.Fatal(err)
			}
			stop := autoRelease(b)
			defer stop()
			ctx := context.Background()
			members, err := g.StartBatch(ctx, []string{"p/m", "q/n"}, llm.Normal, batchReq())
			waitFired(t, g, 1)
			if err != nil && llm.KindOf(err) != llm.KindBatchCapacity {
				t.Fatalf("batch with a crash: %v, want it to run or batch_capacity_unavailable", err)
			}
			t.Logf("batch with the crash: %v", err)
			for _, m := range members {
				if m.Err != nil {
					t.Logf("member %s: %v", m.Model, m.Err)
					if !clean(m.Err) {
						t.Errorf("member %s: %v", m.Model, m.Err)
					}
					continue
				}
				if _, err := io.ReadAll(streamReader{m.Stream}); !clean(err) {
					t.Errorf("member %s: %v", m.Model, err)
				}
				m.Stream.Close()
			}
			waitState(t, g, "idle", idle)
			// The next batch runs whole: every lane and slot came back.
			members = batchAfterRebuild(t, g)
			for _, m := range members {
				if m.Err != nil {
					t.Fatalf("member %s after the crash: %v", m.Model, m.Err)
				}
				if _, err := io.ReadAll(streamReader{m.Stream}); err != nil {
					t.Fatal(err)
				}
				m.Stream.Close()
			}
			waitState(t, g, "idle", idle)
		})
	}
}

// batchAfterRebuild starts a batch of p/m and q/n once the actors a crash hit have rebuilt
// their state. A provider that is still rebuilding refuses a batch's reservation with a 429
// batch_capacity_unavailable saying so, which a client retries after its Retry-After: so
// does this, for as long as that is the refusal, within patience. (A batch that reaches the
// supervisor while it rebuilds waits for the rebuild to end instead.) Any other error fails.
func batchAfterRebuild(t *testing.T, g *Gateway) []llm.BatchMember {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		members, err := g.StartBatch(context.Background(), []string{"p/m", "q/n"}, llm.Normal, batchReq())
		if err == nil {
			return members
		}
		var le *llm.Error
		if !errors.As(err, &le) || le.Kind != llm.KindBatchCapacity || !strings.Contains(le.Message, "is rebuilding its state") ||
			time.Now().After(deadline) {
			t.Fatalf("batch after the crash: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // the provider's rebuild is its lanes' reports: polling with a deadline
	}
}

// streamReader reads a stream's contents as bytes, to its end.
type streamReader struct{ s llm.Stream }

func (r streamReader) Read(p []byte) (int, error) {
	ch, err := r.s.Next()
	if err != nil {
		return 0, err
	}
	return copy(p, ch.Content), nil
}
