package actors

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// countNamed is how many providers of the state are named name.
func countNamed(st AdminState, name string) int {
	n := 0
	for _, p := range st.Providers {
		if p.Name == name {
			n++
		}
	}
	return n
}

// TestReloadReAddedProviderIsOne: a provider removed by a reload and added back while it
// still finishes its call is one provider: /admin/state lists it once, and with lanes 1 a
// new call waits for the call the removed provider runs. Before, the re-added provider got
// a second slot and actor: listed twice, and the backend saw both calls at once.
func TestReloadReAddedProviderIsOne(t *testing.T) {
	ctx := context.Background()
	b, other := newHeld(), newHeld()
	p, q := testProvider("p", b, "m"), testProvider("q", other, "m")
	g := newTestGateway(t, 10, 16, p, q)
	first := startAsync(ctx, g, "p/m", llm.Interactive)
	c1 := b.next(t)

	if ch := reload(t, g, 10, 16, q); !slices.Equal(ch.Removed, []string{"p"}) {
		t.Fatalf("changes %+v", ch)
	}
	if ch := reload(t, g, 10, 16, p, q); !slices.Equal(ch.Added, []string{"p"}) {
		t.Fatalf("changes %+v", ch)
	}
	st := g.State()
	if n := countNamed(st, "p"); n != 1 {
		t.Fatalf("provider p listed %d times: %+v", n, st.Providers)
	}
	if pv, _ := providerNamed(st, "p"); pv.State != "ok" || pv.Running != 1 {
		t.Fatalf("p after it was added back: %+v, want ok and still running its call", pv)
	}
	second := startAsync(ctx, g, "p/m", llm.Interactive)
	waitState(t, g, "the new call queued", func(s AdminState) bool { return s.Queued == 1 })
	b.noCall(t)
	close(c1.release)
	for _, r := range []chan result{first, second} {
		if r == second {
			close(b.next(t).release) // it starts once the first has ended
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
	// Removed again once idle, it stops; added back then, it gets a new slot and serves.
	waitState(t, g, "idle", idle)
	reload(t, g, 10, 16, q)
	waitState(t, g, "p stopped", func(s AdminState) bool { return countNamed(s, "p") == 0 })
	reload(t, g, 10, 16, p, q)
	if n := countNamed(g.State(), "p"); n != 1 {
		t.Fatalf("provider p listed %d times after it stopped and came back", n)
	}
	r := startAsync(ctx, g, "p/m", llm.Interactive)
	close(b.next(t).release)
	if _, err := drain(t, recv(t, r).stream); err != nil {
		t.Fatal(err)
	}
}

// TestReloadSequences drives random sequences of reloads (providers removed, added back,
// changed, in any order) while calls run, queue and end, each provider with one lane and
// its own backend for the whole run. After every reload each configured provider is listed
// once and serves ("ok"), a removed one at most once ("retiring"); every call gets exactly
// one answer (served, or refused as a removed model or a full queue); and no backend ever
// sees more than its one lane's call at once.
func TestReloadSequences(t *testing.T) {
	names := []string{"p0", "p1", "p2"}
	for seed := range uint64(12) {
		rng := rand.New(rand.NewPCG(seed, 44))
		backends := map[string]*heldBackend{}
		provider := func(name string, queue int) Provider {
			p := testProvider(name, backends[name], "m")
			p.QueueLength = queue
			return p
		}
		var all []Provider
		for _, n := range names {
			backends[n] = newHeld()
			all = append(all, provider(n, 4))
		}
		g := newTestGateway(t, 16, 64, all...)
		var calls []chan error
		var held []*heldCall
		collect := func() {
			for _, b := range backends {
				for len(b.opened) > 0 {
					held = append(held, <-b.opened)
				}
			}
		}
		var trace []string
		for step := range 40 {
			switch op := rng.IntN(4); op {
			case 0: // a call to any of the names, configured or not
				n := names[rng.IntN(len(names))]
				calls = append(calls, callAndDrain(g, n+"/m"))
				trace = append(trace, "call "+n)
			case 1: // a running call ends
				collect()
				if len(held) > 0 {
					i := rng.IntN(len(held))
					close(held[i].release)
					held = slices.Delete(held, i, i+1)
					trace = append(trace, "release")
				}
			default: // a reload: each provider in or out, its queue_length 4 or 8
				var ps []Provider
				var in []string
				for _, n := range names {
					if rng.IntN(3) > 0 {
						ps = append(ps, provider(n, 4+4*rng.IntN(2)))
						in = append(in, n)
					}
				}
				if len(ps) == 0 {
					ps, in = append(ps, provider(names[0], 4)), []string{names[0]}
				}
				reload(t, g, 16, 64, ps...)
				trace = append(trace, fmt.Sprintf("reload %v", in))
				st := g.State()
				for _, n := range names {
					p, _ := providerNamed(st, n)
					switch c := countNamed(st, n); {
					case slices.Contains(in, n) && (c != 1 || p.State != "ok"):
						t.Fatalf("seed %d step %d: %s listed %d times, state %q; want once, ok\n%v", seed, step, n, c, p.State, trace)
					case !slices.Contains(in, n) && (c > 1 || c == 1 && p.State != "retiring"):
						t.Fatalf("seed %d step %d: removed %s listed %d times, state %q\n%v", seed, step, n, c, p.State, trace)
					}
				}
			}
		}
		for _, hc := range held {
			close(hc.release)
		}
		finishAll(t, calls, backends, seed)
		for n, b := range backends {
			if m := b.max.Load(); m > 1 {
				t.Fatalf("seed %d: backend %s saw %d calls at once, lanes 1\n%v", seed, n, m, trace)
			}
		}
	}
}

// callAndDrain makes one call in a goroutine (which exits once it is answered and its
// stream read to its end) and returns its outcome: nil when served.
func callAndDrain(g *Gateway, model string) chan error {
	out := make(chan error, 1)
	go func() {
		sv, err := g.Start(context.Background(), model, llm.Interactive,
			&llm.Request{Model: model, Messages: []llm.Message{{Role: "user", Content: llm.Content{Text: "hi"}}}})
		if err == nil {
			for err == nil {
				_, err = sv.Stream.Next()
			}
			sv.Stream.Close()
			if errors.Is(err, io.EOF) {
				err = nil
			}
		}
		out <- err
	}()
	return out
}

// finishAll releases every backend call until each call has its one answer, which must be
// served or a refusal a reload explains.
func finishAll(t *testing.T, calls []chan error, backends map[string]*heldBackend, seed uint64) {
	t.Helper()
	deadline := time.After(patience)
	for i, c := range calls {
		for done := false; !done; {
			select {
			case err := <-c:
				if k := llm.KindOf(err); err != nil && k != llm.KindModelNotFound && k != llm.KindQueueFull {
					t.Fatalf("seed %d: call %d: %v", seed, i, err)
				}
				done = true
			case <-deadline:
				t.Fatalf("seed %d: call %d has no answer within %v", seed, i, patience)
			default:
				for _, b := range backends {
					select {
					case hc := <-b.opened:
						close(hc.release)
					default:
					}
				}
				runtime.Gosched()
			}
		}
	}
}
