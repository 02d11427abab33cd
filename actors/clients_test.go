package actors

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tollgate/tollgate/providers/llm"
)

// startFor is startAsync for a call of client c.
func startFor(g *Gateway, c llm.Client, model string) chan result {
	return startAsync(llm.WithClient(context.Background(), c), g, model, llm.Normal)
}

// TestClientsShareTheQueue: with one lane, a client with a backlog and another with one
// call: the second client's call is the next to start, not the last (SPEC §18), and
// /admin/state counts both by name.
func TestClientsShareTheQueue(t *testing.T) {
	b := newHeld()
	g := newTestGateway(t, 10, 100, testProvider("p", b, "m"))
	a, c := llm.Client{Name: "a"}, llm.Client{Name: "b"}
	var as []chan result
	for range 5 {
		as = append(as, startFor(g, a, "p/m"))
		waitState(t, g, "a's call admitted", func(st AdminState) bool { return st.Running+st.Queued == len(as) })
	}
	bc := startFor(g, c, "p/m")
	st := waitState(t, g, "b's call queued", func(st AdminState) bool { return st.Queued == 5 })
	ps := st.Providers[0]
	if ps.RunningByClient["a"] != 1 || ps.QueuedByClient["a"] != 4 || ps.QueuedByClient["b"] != 1 {
		t.Fatalf("by client: running %v queued %v", ps.RunningByClient, ps.QueuedByClient)
	}
	// a's first call finishes: the next to start is b's, though a's four waited longer.
	close(b.next(t).release)
	finish := func(who string, ch chan result) {
		t.Helper()
		r := recv(t, ch)
		if r.err != nil {
			t.Fatalf("%s: %v", who, r.err)
		}
		if _, err := drain(t, r.stream); err != nil {
			t.Fatalf("%s: %v", who, err)
		}
	}
	finish("a's first call", as[0])
	next := b.next(t)
	if got := llm.ClientOf(next.ctx).Name; got != "b" {
		t.Fatalf("the call started after a's first is %q's, want b's", got)
	}
	close(next.release)
	finish("b's call", bc)
	for i, ch := range as[1:] {
		close(b.next(t).release)
		finish("a's call "+strconv.Itoa(i+1), ch)
	}
	waitState(t, g, "idle", idle)
}

// TestClientMaxQueued: a client with max_queued calls waiting has its next one refused
// client_concurrency_limited with a wait to advise; another client's call is not.
func TestClientMaxQueued(t *testing.T) {
	b := newHeld()
	g := newTestGateway(t, 10, 100, testProvider("p", b, "m"))
	a := llm.Client{Name: "a", MaxQueued: 2}
	running := startFor(g, a, "p/m")
	held := b.next(t)
	q1, q2 := startFor(g, a, "p/m"), startFor(g, a, "p/m")
	waitState(t, g, "two queued", func(st AdminState) bool { return st.Queued == 2 })
	r := recv(t, startFor(g, a, "p/m"))
	var e *llm.Error
	if !errors.As(r.err, &e) || e.Kind != llm.KindClientConcurrency || e.RetryAfter <= 0 {
		t.Fatalf("third waiting call: %v, want client_concurrency_limited with a retry-after", r.err)
	}
	other := startFor(g, llm.Client{Name: "b", MaxQueued: 2}, "p/m")
	waitState(t, g, "b queued", func(st AdminState) bool { return st.Queued == 3 })
	// Revocation answers a's queued calls invalid_api_key; its running one finishes.
	if n := g.RevokeClient("a"); n != 2 {
		t.Fatalf("RevokeClient answered %d calls, want 2", n)
	}
	for _, ch := range []chan result{q1, q2} {
		if r := recv(t, ch); !errors.As(r.err, &e) || e.Kind != llm.KindInvalidAPIKey {
			t.Fatalf("a's queued call after revocation: %v, want invalid_api_key", r.err)
		}
	}
	if n := g.RevokeClient("nobody"); n != 0 {
		t.Fatalf("RevokeClient of a client with nothing queued answered %d", n)
	}
	close(held.release)
	if r := recv(t, running); r.err != nil {
		t.Fatalf("a's running call: %v", r.err)
	} else if _, err := drain(t, r.stream); err != nil {
		t.Fatalf("a's running call did not finish: %v", err)
	}
	close(b.next(t).release)
	if r := recv(t, other); r.err != nil {
		t.Fatalf("b's call: %v", r.err)
	} else if _, err := drain(t, r.stream); err != nil {
		t.Fatal(err)
	}
	waitState(t, g, "idle", idle)
}

// TestClientMaxRunning: a client at its max_running has its next call wait, across
// providers (the cap is gateway-wide), while another client's call starts in the lane it
// leaves free; when its running call ends, its waiting one starts.
func TestClientMaxRunning(t *testing.T) {
	bp, bq := newHeld(), newHeld()
	p, q := testProvider("p", bp, "m"), testProvider("q", bq, "m")
	p.Lanes, q.Lanes = 2, 2
	p.Models[0].Lanes, q.Models[0].Lanes = 2, 2
	g := newTestGateway(t, 10, 100, p, q)
	a, b := llm.Client{Name: "a", MaxRunning: 1}, llm.Client{Name: "b"}
	first := startFor(g, a, "p/m")
	held := bp.next(t)
	second := startFor(g, a, "q/m")
	st := waitState(t, g, "a's second call waits", func(st AdminState) bool { return st.Queued == 1 })
	if n := st.Providers[1].QueuedByClient["a"]; n != 1 {
		t.Fatalf("q queues %d of a's calls, want its second: %+v", n, st.Providers[1])
	}
	other := startFor(g, b, "q/m")
	bHeld := bq.next(t)
	if got := llm.ClientOf(bHeld.ctx).Name; got != "b" {
		t.Fatalf("q's free lane went to %q's call, want b's: a is at its max_running", got)
	}
	if st := g.State(); st.Queued != 1 || st.Running != 2 {
		t.Fatalf("running %d queued %d, want 2 and a's one waiting", st.Running, st.Queued)
	}
	close(held.release)
	if r := recv(t, first); r.err != nil {
		t.Fatal(r.err)
	} else if _, err := drain(t, r.stream); err != nil {
		t.Fatal(err)
	}
	next := bq.next(t)
	if got := llm.ClientOf(next.ctx).Name; got != "a" {
		t.Fatalf("after a's first call the call started at q is %q's, want a's second", got)
	}
	close(next.release)
	if r := recv(t, second); r.err != nil {
		t.Fatal(r.err)
	} else if _, err := drain(t, r.stream); err != nil {
		t.Fatal(err)
	}
	close(bHeld.release)
	if r := recv(t, other); r.err != nil {
		t.Fatal(r.err)
	} else if _, err := drain(t, r.stream); err != nil {
		t.Fatal(err)
	}
	waitState(t, g, "idle", idle)
}

// TestRevokeSkipsStoppedProviders: once a reload removed a provider and its actor stopped,
// neither State nor RevokeClient sends it a query: a stopped actor's mail is dropped, and
// each would wait its whole timeout for an answer that never comes.
func TestRevokeSkipsStoppedProviders(t *testing.T) {
	stay := newHeld()
	g := newTestGateway(t, 10, 16, testProvider("old", newHeld(), "m"), testProvider("stay", stay, "m"))
	before := actorCount(g)
	reload(t, g, 10, 16, testProvider("stay", stay, "m"))
	for deadline := time.Now().Add(patience); actorCount(g) != before-2; {
		if time.Now().After(deadline) {
			t.Fatalf("actors: %d before, %d after the removed provider retired (want %d)", before, actorCount(g), before-2)
		}
		time.Sleep(time.Millisecond) // polling with a deadline
	}
	var lost atomic.Int32
	sub := g.system.EventStream.Subscribe(func(evt any) { // called on the sender's goroutine
		if dl, ok := evt.(*actor.DeadLetterEvent); ok {
			switch dl.Message.(type) {
			case *stateQuery, *revokeClient:
				lost.Add(1)
			}
		}
	})
	defer g.system.EventStream.Unsubscribe(sub)
	if _, listed := providerNamed(g.State(), "old"); listed {
		t.Fatal("the removed provider is still listed")
	}
	if n := g.RevokeClient("a"); n != 0 {
		t.Fatalf("RevokeClient answered %d calls, want 0", n)
	}
	if n := lost.Load(); n != 0 {
		t.Fatalf("%d queries went to the stopped provider", n)
	}
}

// openHeld is a backend whose Open blocks until the test releases it, as a non-streaming
// HTTP backend's does until its whole answer is ready.
type openHeld struct {
	opened  chan struct{}
	release chan struct{}
}

func (b *openHeld) Open(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	b.opened <- struct{}{}
	select {
	case <-b.release:
		return instantStream{}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TestClientMaxQueuedCountsOnlyWaiting: a call that started counts no more in its client's
// max_queued, even while its backend has not answered yet, so the client's next call
// queues behind it instead of being refused.
func TestClientMaxQueuedCountsOnlyWaiting(t *testing.T) {
	b := &openHeld{opened: make(chan struct{}, 4), release: make(chan struct{})}
	g := newTestGateway(t, 10, 100, testProvider("p", b, "m"))
	a := llm.Client{Name: "a", MaxQueued: 1}
	running := startFor(g, a, "p/m")
	<-b.opened // started: the backend holds its Open
	queued := startFor(g, a, "p/m")
	waitState(t, g, "one queued", func(st AdminState) bool { return st.Queued == 1 })
	r := recv(t, startFor(g, a, "p/m"))
	var e *llm.Error
	if !errors.As(r.err, &e) || e.Kind != llm.KindClientConcurrency {
		t.Fatalf("a second waiting call: %v, want client_concurrency_limited", r.err)
	}
	close(b.release)
	for _, ch := range []chan result{running, queued} {
		if r := recv(t, ch); r.err != nil {
			t.Fatalf("a's call: %v", r.err)
		} else if _, err := drain(t, r.stream); err != nil {
			t.Fatal(err)
		}
	}
	waitState(t, g, "idle", idle)
}
