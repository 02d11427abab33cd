package actors

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tollgate/tollgate/providers/fake"
	"github.com/tollgate/tollgate/providers/llm"
)

func TestMain(m *testing.M) {
	// protoactor's dead-letter throttle parks one goroutine for its interval after a message
	// to a stopped actor (a release racing a shutdown, say); it ends by itself.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
}

func kindOf(t *testing.T, err error) llm.Kind {
	t.Helper()
	var e *llm.Error
	if !errors.As(err, &e) {
		t.Fatalf("want *llm.Error, got %T %v", err, err)
	}
	return e.Kind
}

func TestStreamsThroughActors(t *testing.T) {
	b := fake.New(fake.Config{Name: "demo", Default: fake.Script{Reply: "hello there world"}})
	g := newTestGateway(t, 10, 16, testProvider("demo", b, "echo"))
	sv, err := g.Start(context.Background(), "demo/echo", llm.Interactive, &llm.Request{Model: "demo/echo"})
	s, wait := sv.Stream, sv.QueueWait
	if err != nil {
		t.Fatal(err)
	}
	// An admission round trip (offer, grant): microseconds, shown as 0 ms, but a loaded
	// machine can stretch it; never the time of the call itself, nor since any other instant.
	if wait >= 100*time.Millisecond || wait < 0 {
		t.Errorf("queue wait %v for a call that started at once", wait)
	}
	text, err := drain(t, s)
	if err != nil || text != "hello there world" {
		t.Fatalf("got %q, %v", text, err)
	}
	waitState(t, g, "idle", idle)
}

func TestUnknownModel(t *testing.T) {
	g := newTestGateway(t, 10, 16, testProvider("demo", newHeld(), "echo"))
	for _, id := range []string{"demo/nope", "nope/echo", "echo"} {
		_, err := g.Start(context.Background(), id, llm.Interactive, &llm.Request{})
		if k := kindOf(t, err); k != llm.KindModelNotFound {
			t.Errorf("%s: kind %v", id, k)
		}
	}
}

func TestRejections(t *testing.T) {
	ctx := context.Background()
	t.Run("queue full", func(t *testing.T) {
		b := newHeld()
		p := testProvider("p", b, "m")
		p.QueueLength = 1
		g := newTestGateway(t, 10, 16, p)
		running := startAsync(ctx, g, "p/m", llm.Interactive)
		first := b.next(t)
		queued := startAsync(ctx, g, "p/m", llm.Interactive)
		waitState(t, g, "one queued", func(s AdminState) bool { return s.Queued == 1 })
		_, err := g.Start(ctx, "p/m", llm.Interactive, &llm.Request{})
		if k := kindOf(t, err); k != llm.KindQueueFull {
			t.Fatalf("kind %v, want queue full", k)
		}
		var e *llm.Error
		errors.As(err, &e)
		if e.RetryAfter <= 0 || e.Provider != "p" {
			t.Errorf("rejection lacks retry hint or provider: %+v", e)
		}
		close(first.release)
		r := recv(t, running)
		if _, err := drain(t, r.stream); err != nil {
			t.Fatal(err)
		}
		r2 := recv(t, queued)
		if r2.err != nil || r2.wait <= 0 {
			t.Fatalf("queued call: %v, wait %v", r2.err, r2.wait)
		}
		close(b.next(t).release)
		drain(t, r2.stream)
		waitState(t, g, "idle", idle)
	})
	t.Run("overloaded", func(t *testing.T) {
		b := newHeld()
		g := newTestGateway(t, 1, 2, testProvider("p", b, "m"))
		r1 := startAsync(ctx, g, "p/m", llm.Interactive)
		c1 := b.next(t)
		r2 := startAsync(ctx, g, "p/m", llm.Interactive)
		waitState(t, g, "one queued", func(s AdminState) bool { return s.Queued == 1 })
		_, err := g.Start(ctx, "p/m", llm.Interactive, &llm.Request{})
		if k := kindOf(t, err); k != llm.KindOverloaded {
			t.Fatalf("kind %v, want overloaded", k)
		}
		close(c1.release)
		drain(t, recv(t, r1).stream)
		close(b.next(t).release)
		drain(t, recv(t, r2).stream)
	})
	t.Run("queue timeout", func(t *testing.T) {
		b := newHeld()
		p := testProvider("p", b, "m")
		p.QueueTimeout = 30 * time.Millisecond
		g := newTestGateway(t, 10, 16, p)
		r1 := startAsync(ctx, g, "p/m", llm.Interactive)
		c1 := b.next(t)
		sv, err := g.Start(ctx, "p/m", llm.Interactive, &llm.Request{})
		wait := sv.QueueWait
		if k := kindOf(t, err); k != llm.KindQueueTimeout {
			t.Fatalf("kind %v, want queue timeout", k)
		}
		if wait < 30*time.Millisecond {
			t.Errorf("queue wait %v, want ≥ 30ms", wait)
		}
		close(c1.release)
		drain(t, recv(t, r1).stream)
		waitState(t, g, "idle", idle)
		b.noCall(t)
	})
}

func TestCancelWhileQueuedNeverCallsBackend(t *testing.T) {
	b := newHeld()
	g := newTestGateway(t, 10, 16, testProvider("p", b, "m"))
	r1 := startAsync(context.Background(), g, "p/m", llm.Interactive)
	c1 := b.next(t)
	ctx, cancel := context.WithCancel(context.Background())
	r2 := startAsync(ctx, g, "p/m", llm.Interactive)
	waitState(t, g, "one queued", func(s AdminState) bool { return s.Queued == 1 })
	cancel()
	if r := recv(t, r2); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled call: %v", r.err)
	}
	waitState(t, g, "queue empty", func(s AdminState) bool { return s.Queued == 0 })
	close(c1.release)
	drain(t, recv(t, r1).stream)
	waitState(t, g, "idle", idle)
	b.noCall(t)
	if n := b.calls.Load(); n != 1 {
		t.Fatalf("backend calls %d, want 1", n)
	}
}

func TestCancelWhileRunningStopsBackendBeforeLaneReturns(t *testing.T) {
	b := newHeld()
	g := newTestGateway(t, 10, 16, testProvider("p", b, "m"))
	ctx, cancel := context.WithCancel(context.Background())
	r1 := startAsync(ctx, g, "p/m", llm.Interactive)
	c1 := b.next(t)
	s := recv(t, r1).stream
	waiting := startAsync(context.Background(), g, "p/m", llm.Interactive)
	waitState(t, g, "one queued", func(s AdminState) bool { return s.Queued == 1 })
	cancel()
	select {
	case <-c1.ctx.Done():
	case <-time.After(time.Second):
		t.Fatal("backend context not cancelled after the client left")
	}
	// The lane comes back once the backend has stopped, without waiting for the HTTP
	// handler: the waiting call starts only after the first call's backend was closed.
	c2 := b.next(t)
	select {
	case <-c1.closed:
	default:
		t.Fatal("the next call started before the cancelled backend had stopped")
	}
	if _, err := s.Next(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next after hang-up: %v", err)
	}
	s.Close()
	close(c2.release)
	drain(t, recv(t, waiting).stream)
	waitState(t, g, "idle", idle)
}

func TestRunTimeout(t *testing.T) {
	b := newHeld()
	p := testProvider("p", b, "m")
	p.RunTimeout = 20 * time.Millisecond
	g := newTestGateway(t, 10, 16, p)
	sv, err := g.Start(context.Background(), "p/m", llm.Interactive, &llm.Request{})
	if err != nil {
		t.Fatal(err)
	}
	s := sv.Stream
	b.next(t)
	_, err = s.Next()
	if k := kindOf(t, err); k != llm.KindRunTimeout {
		t.Fatalf("kind %v, want run timeout", k)
	}
	s.Close()
	waitState(t, g, "idle", idle)
}

func TestPriorityAndRoundRobin(t *testing.T) {
	a, bb := newHeld(), newHeld()
	g := newTestGateway(t, 1, 16, testProvider("a", a, "m"), testProvider("b", bb, "m"))
	first := startAsync(context.Background(), g, "a/m", llm.Interactive)
	blocker := a.next(t)
	// Queue: a background call, then normal calls on both providers, then interactive ones.
	var order []string
	var chans []chan result
	enqueue := func(model string, prio llm.Priority) {
		chans = append(chans, startAsync(context.Background(), g, model, prio))
		n := len(chans)
		waitState(t, g, "queued", func(s AdminState) bool { return s.Queued == n })
	}
	enqueue("b/m", llm.Background)
	enqueue("a/m", llm.Normal)
	enqueue("b/m", llm.Normal)
	enqueue("a/m", llm.Interactive)
	enqueue("b/m", llm.Interactive)
	close(blocker.release)
	drain(t, recv(t, first).stream)
	// Each started call is drained in the background so the next one can start
	// (max_running is 1); the goroutines end when their streams do.
	done := make(chan error, len(chans))
	for _, ch := range chans {
		go func() {
			r := <-ch
			if r.err != nil {
				done <- r.err
				return
			}
			for {
				if _, err := r.stream.Next(); err != nil {
					r.stream.Close()
					done <- nil
					return
				}
			}
		}()
	}
	for range chans {
		var c *heldCall
		var who string
		select {
		case c = <-a.opened:
			who = "a"
		case c = <-bb.opened:
			who = "b"
		case <-time.After(5 * time.Second):
			t.Fatal("no call started")
		}
		order = append(order, who)
		close(c.release)
	}
	for range chans {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	// a was served last (the blocker), so the interactive turn starts at b; then normal
	// starts after b's provider: a; then b; then the background call.
	exp := []string{"b", "a", "a", "b", "b"}
	for i := range exp {
		if order[i] != exp[i] {
			t.Fatalf("start order %v, want %v", order, exp)
		}
	}
	waitState(t, g, "idle", idle)
}

func TestShutdownAnswersEveryone(t *testing.T) {
	b := newHeld()
	g, err := New(Options{MaxRunning: 1, MaxAdmitted: 4, Providers: []Provider{testProvider("p", b, "m")}})
	if err != nil {
		t.Fatal(err)
	}
	r1 := startAsync(context.Background(), g, "p/m", llm.Interactive)
	b.next(t)
	s := recv(t, r1).stream
	r2 := startAsync(context.Background(), g, "p/m", llm.Interactive)
	waitState(t, g, "queued", func(s AdminState) bool { return s.Queued == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := g.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if k := kindOf(t, recv(t, r2).err); k != llm.KindDraining {
		t.Fatalf("queued call at shutdown: %v", k)
	}
	if _, err := s.Next(); kindOf(t, err) != llm.KindDraining {
		t.Fatalf("running call at shutdown: %v", err)
	}
	s.Close()
}

func TestStartRacingShutdownNeverHangs(t *testing.T) {
	g, err := New(Options{MaxRunning: 4, MaxAdmitted: 8, Providers: []Provider{
		testProvider("p", fake.New(fake.Config{Name: "p", Default: fake.Script{Reply: "x"}}), "m")}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := g.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	// A Start that passed the draining check just before Shutdown sends its call to a
	// supervisor that no longer exists: it must still get an answer.
	g.draining.Store(false)
	done := make(chan error, 1)
	go func() { // ends when Start answers
		_, err := g.Start(context.Background(), "p/m", llm.Interactive, &llm.Request{})
		done <- err
	}()
	select {
	case err := <-done:
		if kindOf(t, err) != llm.KindDraining {
			t.Fatalf("got %v, want gateway_draining", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Start after the supervisor stopped never returned")
	}
}

// TestShutdownTwice: a second Shutdown (an app's drain, then a test's or a caller's own)
// returns without stopping the stopped actor system again, which panicked inside protoactor.
func TestShutdownTwice(t *testing.T) {
	g, err := New(Options{MaxRunning: 4, MaxAdmitted: 8, Providers: []Provider{
		testProvider("p", fake.New(fake.Config{Name: "p", Default: fake.Script{Reply: "x"}}), "m")}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := g.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.Shutdown(ctx); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
}
