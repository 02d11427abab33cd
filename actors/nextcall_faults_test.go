//go:build tollgate_faults

package actors

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tollgate/tollgate/providers/llm"
)

// newHold is a fault's hold and its release, which closes it once (at the latest when the
// test ends).
func newHold(t *testing.T) (<-chan struct{}, func()) {
	hold := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(hold) }) }
	t.Cleanup(release)
	return hold, release
}

// TestNextCallFindsTheLanesFree: a client that sends its next call the moment its answer
// has ended finds the lanes free, even on a provider that never queues (queue_length 0):
// the stream tells its provider that the lanes are free before the answer's end reaches
// the client, not through its lane. The lane is held on the release here, so a release
// that went through the lane first would reach the provider only after the next call had
// been refused 429.
func TestNextCallFindsTheLanesFree(t *testing.T) {
	p := testProvider("p", &downFirst{}, "m")
	p.QueueLength = 0
	g := newTestGateway(t, 10, 16, p)
	hold, release := newHold(t)
	if err := g.InjectFault(Fault{Actor: "lane", On: "released", Hold: hold}); err != nil {
		t.Fatal(err)
	}
	client := func(name string) context.Context {
		return llm.WithClient(context.Background(), llm.Client{Name: name})
	}
	if o := got(t, runCall(client("first"), g, "p/m")); o.err != nil || o.text != "ok" {
		t.Fatalf("first call: %q, %v; want ok", o.text, o.err)
	}
	next := runCall(client("next"), g, "p/m")
	for deadline := time.Now().Add(patience); ; {
		select {
		case o := <-next:
			t.Fatalf("the next call was answered (%q, %v) before the held lane took its release, want it started on the free lane", o.text, o.err)
		default:
		}
		if g.State().Providers[0].RunningByClient["next"] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the next call never started")
		}
		time.Sleep(time.Millisecond) // polling with a deadline, not synchronisation
	}
	release()
	if o := got(t, next); o.err != nil || o.text != "ok" {
		t.Fatalf("next call: %q, %v; want ok", o.text, o.err)
	}
	waitState(t, g, "idle", idle)
}

// TestRebuildSkipsACallThatEndedBeforeItsReport: a call whose stream ends while its
// provider rebuilds after a crash, before its lane has reported what runs on it, is not put
// back into the rebuilt policy: the stream told the provider of its end itself, and a
// report that still listed it would leave its lanes counted running for good.
func TestRebuildSkipsACallThatEndedBeforeItsReport(t *testing.T) {
	b := newHeld()
	g := newTestGateway(t, 10, 16, testProvider("p", b, "m"))
	running := runCall(context.Background(), g, "p/m")
	c := b.next(t)
	hold, release := newHold(t)
	holding := make(chan struct{}, 1)
	if err := g.InjectFault(Fault{Actor: "lane", On: "reportRunning", Hold: hold, Holding: holding}); err != nil {
		t.Fatal(err)
	}
	// The rebuilding provider's taking the report is seen through a hold that never waits.
	reported, taken := make(chan struct{}), make(chan struct{}, 1)
	close(reported)
	if err := g.InjectFault(Fault{Actor: "provider_rebuilding", On: "laneReport", Hold: reported, Holding: taken}); err != nil {
		t.Fatal(err)
	}
	if err := g.InjectFault(Fault{Actor: "provider", On: "stateQuery"}); err != nil {
		t.Fatal(err)
	}
	g.State() // crashes the provider: its rebuild asks the lane, which is held, for its report
	select {
	case <-holding:
	case <-time.After(patience):
		t.Fatal("the rebuilding provider never asked its lane what runs")
	}
	close(c.release)
	if o := got(t, running); o.err != nil {
		t.Fatalf("the running call: %v, want it served", o.err)
	}
	release()
	select {
	case <-taken:
	case <-time.After(patience):
		t.Fatal("the rebuilding provider never took its lane's report")
	}
	// Asked after the report was taken: the state is the rebuilt one.
	if st := g.State(); st.Providers[0].Running != 0 {
		t.Fatalf("the rebuilt provider counts %d calls running, want 0: the ended call was put back", st.Providers[0].Running)
	}
	waitState(t, g, "idle after the rebuild", idle)
}

// stopsPosted watches the stop messages posted to the gateway's mailboxes: with one
// provider of one model the third is the lane's (after the supervisor's and the
// provider's), and closes third.
type stopsPosted struct {
	n     atomic.Int32
	third chan struct{}
}

func (l *stopsPosted) MailboxStarted()     {}
func (l *stopsPosted) MessageReceived(any) {}
func (l *stopsPosted) MailboxEmpty()       {}
func (l *stopsPosted) MessagePosted(m any) {
	if _, stop := m.(*actor.Stop); stop && l.n.Add(1) == 3 {
		close(l.third)
	}
}

// TestShutdownWhileALaneHoldsEndedCalls: a gateway shutting down stops, even when a lane is
// told to stop before it has taken the releases of the calls that ended on it (their
// streams told the provider first, so the provider went idle, and a stop overtakes the
// user messages queued in a mailbox). A hold orders it: the drain's cancellation holds the
// lane until both calls have ended and its stop is queued behind the hold. The lane then
// stops with the calls still on its books: it forgets the ended ones as it stops (their
// leases go back), and hands no call a new request actor as its own stop; a child spawned
// after its children were told to stop would never be, and the shutdown would wait for it
// for ever.
func TestShutdownWhileALaneHoldsEndedCalls(t *testing.T) {
	seen := &stopsPosted{third: make(chan struct{})}
	b := newHeld()
	p := testProvider("p", b, "m")
	p.Lanes, p.Models[0].Lanes = 2, 2
	g := newWatchedGateway(t, seen, 10, 16, p)
	first, second := runCall(context.Background(), g, "p/m"), runCall(context.Background(), g, "p/m")
	calls := []*heldCall{b.next(t), b.next(t)}
	hold, release := newHold(t)
	holding := make(chan struct{}, 1)
	if err := g.InjectFault(Fault{Actor: "lane", On: "cancelAll", Hold: hold, Holding: holding}); err != nil {
		t.Fatal(err)
	}
	waitFor := func(ch <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(patience):
			t.Fatal(what)
		}
	}
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		shut <- g.Shutdown(ctx)
	}()
	waitFor(holding, "the drain never told the lane to cancel what runs")
	for _, c := range calls {
		close(c.release)
	}
	for i, r := range []chan outcome{first, second} {
		if o := got(t, r); o.err != nil {
			t.Fatalf("call %d: %v, want it served", i, o.err)
		}
	}
	waitFor(seen.third, "the lane was never told to stop")
	release()
	if err := <-shut; err != nil {
		t.Fatalf("shutdown: %v, want it to finish", err)
	}
}
