package actors

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// wakeCounter counts the wake-ups the providers' timers post.
type wakeCounter struct{ mailboxCounter }

func (c *wakeCounter) MessagePosted(m any) {
	if _, ok := m.(*wake); ok {
		c.n.Add(1)
	}
}

// A queue deadline's timer goes with the last call waiting: a call that waited and left
// costs no wake-up at its deadline. The provider then holds a call that waits until its
// queue_timeout, whose expiry is the one wake-up there may be; a timer left armed for the
// call that left would wake the provider first, for nothing, and again for the expiry.
func TestQueueTimerStopsWhenTheQueueEmpties(t *testing.T) {
	wakes := &wakeCounter{}
	b := newHeld()
	p := testProvider("p", b, "m")
	p.QueueTimeout = time.Second
	g := newWatchedGateway(t, wakes, 10, 16, p)
	ctx := context.Background()
	first := startAsync(ctx, g, "p/m", llm.Normal)
	c1 := b.next(t)
	leaving, leave := context.WithCancel(ctx)
	waiting := startAsync(leaving, g, "p/m", llm.Normal)
	waitState(t, g, "one waiting", func(s AdminState) bool { return s.Queued == 1 })
	leave()
	if r := recv(t, waiting); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("the call that left: %v, want its cancellation", r.err)
	}
	late := startAsync(ctx, g, "p/m", llm.Normal)
	if r := recv(t, late); llm.KindOf(r.err) != llm.KindQueueTimeout {
		t.Fatalf("the call that waited: %v, want provider_queue_timeout", r.err)
	}
	if n := wakes.n.Load(); n != 1 {
		t.Errorf("the provider woke %d times for one expiry", n)
	}
	close(c1.release)
	if r := recv(t, first); r.err != nil {
		t.Fatalf("the running call: %v", r.err)
	} else if _, err := drain(t, r.stream); err != nil {
		t.Fatalf("the running call's stream: %v", err)
	}
}
