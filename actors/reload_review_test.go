package actors

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// keyedHeld is a held backend with one key; once refuse is set every call is a 401 on it.
type keyedHeld struct {
	*heldBackend
	name   string
	refuse bool // set before the calls it refuses are started
	used   chan string
}

func (k *keyedHeld) Keys(string) int { return 1 }

func (k *keyedHeld) OpenWithKey(ctx context.Context, req *llm.Request, i int) (llm.Stream, error) {
	k.used <- fmt.Sprintf("%s key %d", k.name, i)
	if k.refuse {
		return nil, &llm.Error{Kind: llm.KindUpstreamAuth, Message: "invalid api key", Key: i}
	}
	return k.heldBackend.Open(ctx, req)
}

// A call queued before a reload that replaced its provider's adapter (a revoked key rotated
// out) starts on the new adapter: on the old one it would send the revoked key, and its 401
// would set the new, good key aside.
func TestReloadQueuedCallStartsOnTheNewAdapter(t *testing.T) {
	ctx := context.Background()
	used := make(chan string, 16)
	oldB := &keyedHeld{heldBackend: newHeld(), name: "old", used: used}
	p := testProvider("p", oldB, "m")
	p.Keys, p.KeyIDs = 1, []string{"revoked"}
	g := newTestGateway(t, 10, 16, p)
	r1 := startAsync(ctx, g, "p/m", llm.Interactive)
	c1 := oldB.next(t)
	if got := <-used; got != "old key 0" {
		t.Fatalf("first call on %s", got)
	}
	r2 := startAsync(ctx, g, "p/m", llm.Interactive)
	waitState(t, g, "one queued", func(s AdminState) bool { return s.Queued == 1 })

	oldB.refuse = true // the backend refuses the revoked key from now on
	newB := &keyedHeld{heldBackend: newHeld(), name: "new", used: used}
	p.Backend, p.KeyIDs = newB, []string{"fresh"}
	reload(t, g, 10, 16, p)
	close(c1.release)
	if _, err := drain(t, recv(t, r1).stream); err != nil {
		t.Fatal(err)
	}
	if got := <-used; got != "new key 0" {
		t.Errorf("the call queued before the reload started on %s, want the new adapter", got)
	}
	go func() { close(newB.next(t).release) }()
	if res := recv(t, r2); res.err != nil {
		t.Fatalf("the queued call: %v", res.err)
	} else if _, err := drain(t, res.stream); err != nil {
		t.Fatal(err)
	}
	go func() { <-used; close(newB.next(t).release) }()
	sv, err := g.Start(ctx, "p/m", llm.Interactive, &llm.Request{})
	if err != nil {
		t.Fatalf("a new call after the reload: %v", err)
	}
	if _, err := drain(t, sv.Stream); err != nil {
		t.Fatal(err)
	}
}

// A reload whose context has ended still waits for the supervisor before it publishes
// Start's table: a route to a provider whose actor is not spawned yet would have no actor.
func TestReloadWithEndedContext(t *testing.T) {
	b := newHeld()
	g := newTestGateway(t, 10, 16, testProvider("p", b, "m"))
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 50 {
		q := testProvider(fmt.Sprintf("q%d", i), b, "m")
		_, err := g.Reconfigure(ended, Options{MaxRunning: 10, MaxAdmitted: 16, Providers: []Provider{testProvider("p", b, "m"), q}})
		if err != nil && !errors.Is(err, ErrUnconfirmed) {
			t.Fatalf("reload %d: %v", i, err)
		}
		for _, sl := range g.slots.all() {
			if !sl.retired.Load() && sl.pid.Load() == nil {
				if _, routed := g.table.Load().lookup(sl.name + "/m"); routed {
					t.Fatalf("reload %d (%v): the table routes to %s, which has no actor", i, err, sl.name)
				}
			}
		}
	}
	waitState(t, g, "idle", idle)
}

// A provider taken out of service and then removed by a reload stops, its lanes with it.
func TestReloadRemovesAProviderOutOfService(t *testing.T) {
	b, d := newHeld(), newHeld()
	keep := testProvider("keep", b, "m")
	g := newTestGateway(t, 10, 16, keep, testProvider("dead", d, "m"))
	sl := g.slots.at(1)
	sl.down.Store(true)
	g.system.Root.Send(sl.pid.Load(), &failNow{})
	waitState(t, g, "dead out of service", func(s AdminState) bool {
		p, ok := providerNamed(s, "dead")
		return ok && p.State == "out_of_service"
	})
	before := actorCount(g)
	reload(t, g, 10, 16, keep)
	deadline := time.Now().Add(5 * time.Second)
	for !sl.retired.Load() || actorCount(g) >= before {
		if time.Now().After(deadline) {
			t.Fatalf("the removed provider never stopped: retired %v, actors %d then %d", sl.retired.Load(), before, actorCount(g))
		}
		time.Sleep(time.Millisecond) // polling with a deadline
	}
	if _, listed := providerNamed(g.State(), "dead"); listed {
		t.Error("/admin/state still lists the removed provider")
	}
}
