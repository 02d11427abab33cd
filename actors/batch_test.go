package actors

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

func batchReq() *llm.Request {
	return &llm.Request{Messages: []llm.Message{{Role: "user", Content: llm.Content{Text: "hi"}}}}
}

// batchGateway has provider a (2 lanes: models x and y, one lane each) and b (1 lane: z).
func batchGateway(t *testing.T, maxRunning int) (*Gateway, *heldBackend) {
	t.Helper()
	held := newHeld()
	a := testProvider("a", held, "x", "y")
	a.Lanes = 2
	return newTestGateway(t, maxRunning, 16, a, testProvider("b", held, "z")), held
}

func TestBatchStartsEveryMemberAtOnce(t *testing.T) {
	g, held := batchGateway(t, 10)
	members, err := g.StartBatch(context.Background(), []string{"a/x", "b/z", "a/y"}, llm.Normal, batchReq())
	if err != nil {
		t.Fatal(err)
	}
	// Every backend has been called before any member was read.
	if n := len(held.opened); n != 3 {
		t.Fatalf("%d backend calls had begun when StartBatch returned, want 3", n)
	}
	for range 3 {
		close(held.next(t).release)
	}
	for i, want := range []string{"a/x", "b/z", "a/y"} {
		m := members[i]
		if m.Err != nil || m.Model != want || m.Provider != want[:1] || m.Attempts != 1 || m.QueueWait != 0 {
			t.Fatalf("member %d: %+v", i, m)
		}
		if text, err := drain(t, m.Stream); err != nil || text != "ok "+want[2:] {
			t.Fatalf("member %d: %q %v", i, text, err)
		}
	}
	waitState(t, g, "idle", idle)
}

func TestBatchRefusals(t *testing.T) {
	eleven := make([]string, 11)
	for i := range eleven {
		eleven[i] = "a/x"
	}
	cases := []struct {
		name       string
		maxRunning int
		models     []string
		kind       llm.Kind
		param      string
		limits     []llm.ScopeLimit
		message    string
	}{
		{name: "more than 10", maxRunning: 10, models: eleven, kind: llm.KindBatchTooLarge, param: "models"},
		{name: "unknown model", maxRunning: 10, models: []string{"a/x", "a/nope"}, kind: llm.KindModelNotFound, param: "models[1]"},
		{name: "a provider's lanes", maxRunning: 10, models: []string{"b/z", "b/z"}, kind: llm.KindBatchImpossible, param: "models",
			limits:  []llm.ScopeLimit{{Provider: "b", Requested: 2, Limit: 1}, {Provider: "b", Model: "b/z", Requested: 2, Limit: 1}},
			message: "2 members of provider b, which has 1 lanes"},
		{name: "a model's lanes only", maxRunning: 10, models: []string{"a/x", "a/x", "b/z"}, kind: llm.KindBatchImpossible, param: "models",
			limits:  []llm.ScopeLimit{{Provider: "a", Model: "a/x", Requested: 2, Limit: 1}},
			message: "2 members of model a/x, which runs at most 1 at once"},
		{name: "max_running", maxRunning: 2, models: []string{"a/x", "a/y", "b/z"}, kind: llm.KindBatchImpossible, param: "models",
			limits:  []llm.ScopeLimit{{Requested: 3, Limit: 2}},
			message: "3 members in all, while the gateway runs at most 2 at once (max_running)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g, held := batchGateway(t, tc.maxRunning)
			_, err := g.StartBatch(context.Background(), tc.models, llm.Normal, batchReq())
			var e *llm.Error
			if !errors.As(err, &e) || e.Kind != tc.kind || e.Param != tc.param || e.RetryAfter != 0 {
				t.Fatalf("got %#v, want kind %v param %s and no wait", err, tc.kind, tc.param)
			}
			if !reflect.DeepEqual(e.Limits, tc.limits) {
				t.Errorf("limits %+v, want %+v", e.Limits, tc.limits)
			}
			if !strings.Contains(e.Message, tc.message) {
				t.Errorf("message %q lacks %q", e.Message, tc.message)
			}
			if n := held.calls.Load(); n != 0 {
				t.Errorf("%d backend calls for a batch that never starts", n)
			}
			waitState(t, g, "idle", idle)
		})
	}
}

// TestBatchBusyNow: a batch that could fit but not now is 429 with a wait, nothing of it
// runs (not even the members whose lanes were free), and it fits once the lane is back.
func TestBatchBusyNow(t *testing.T) {
	g, held := batchGateway(t, 10)
	ctx := context.Background()
	single := startAsync(ctx, g, "b/z", llm.Normal)
	c := held.next(t)
	for _, models := range [][]string{{"a/x", "b/z"}, {"b/z", "a/x", "a/y"}} {
		_, err := g.StartBatch(ctx, models, llm.Interactive, batchReq())
		var e *llm.Error
		if !errors.As(err, &e) || e.Kind != llm.KindBatchCapacity || e.RetryAfter <= 0 || e.Provider != "b" ||
			!strings.Contains(e.Message, "provider b has 0 of its lanes free now; the batch needs 1") {
			t.Fatalf("%v: got %#v, want batch_capacity_unavailable naming b with a wait", models, err)
		}
		st := waitState(t, g, "only the single call", func(s AdminState) bool { return s.Running == 1 })
		if st.Providers[0].Running != 0 {
			t.Fatalf("provider a still counts %d running after the refused batch", st.Providers[0].Running)
		}
	}
	held.noCall(t)
	close(c.release)
	if r := recv(t, single); r.err != nil {
		t.Fatal(r.err)
	} else if _, err := drain(t, r.stream); err != nil {
		t.Fatal(err)
	}
	waitState(t, g, "idle", idle)
	members, err := g.StartBatch(ctx, []string{"a/x", "b/z"}, llm.Normal, batchReq())
	if err != nil {
		t.Fatal(err)
	}
	for range members {
		close(held.next(t).release)
	}
	for _, m := range members {
		if _, err := drain(t, m.Stream); err != nil {
			t.Fatal(err)
		}
	}
	waitState(t, g, "idle", idle)
}

// TestBatchNeverPassesAQueue: a request that waits for a provider's lane gets it before a
// batch that needs the same lane. (A batch refused here is not a batch that passed.)
func TestBatchNeverPassesAQueue(t *testing.T) {
	g, held := batchGateway(t, 10)
	ctx := context.Background()
	first := startAsync(ctx, g, "b/z", llm.Normal)
	c1 := held.next(t)
	waiting := startAsync(ctx, g, "b/z", llm.Background)
	waitState(t, g, "one waiting", func(s AdminState) bool { return s.Queued == 1 })
	close(c1.release)
	if r := recv(t, first); r.err != nil {
		t.Fatal(r.err)
	} else if _, err := drain(t, r.stream); err != nil {
		t.Fatal(err)
	}
	// The lane went to the waiting call; the batch finds it busy.
	c2 := held.next(t)
	if _, err := g.StartBatch(ctx, []string{"a/x", "b/z"}, llm.Interactive, batchReq()); llm.KindOf(err) != llm.KindBatchCapacity {
		t.Fatalf("batch while the waiting call runs: %v", err)
	}
	close(c2.release)
	if r := recv(t, waiting); r.err != nil {
		t.Fatal(r.err)
	} else if _, err := drain(t, r.stream); err != nil {
		t.Fatal(err)
	}
	waitState(t, g, "idle", idle)
}

// TestBatchRateLimit: a batch needs a token for every member at once, and a refused one
// gives back the tokens of the providers that had reserved.
func TestBatchRateLimit(t *testing.T) {
	held := newHeld()
	r := testProvider("r", held, "m", "n")
	r.Lanes, r.RateLimit = 2, RateLimit{RPM: 1, Burst: 1}
	g := newTestGateway(t, 10, 16, r, testProvider("b", held, "z"))
	ctx := context.Background()
	_, err := g.StartBatch(ctx, []string{"r/m", "r/n"}, llm.Normal, batchReq())
	if e := (*llm.Error)(nil); !errors.As(err, &e) || e.Kind != llm.KindBatchCapacity || !strings.Contains(e.Message, "rate limit") {
		t.Fatalf("two members with one token: %v", err)
	}
	// r reserves its one member, b refuses (busy): r's token comes back, so a single call
	// still starts at once.
	busy := startAsync(ctx, g, "b/z", llm.Normal)
	cb := held.next(t)
	if _, err := g.StartBatch(ctx, []string{"r/m", "b/z"}, llm.Normal, batchReq()); llm.KindOf(err) != llm.KindBatchCapacity {
		t.Fatalf("batch with b busy: %v", err)
	}
	single := startAsync(ctx, g, "r/m", llm.Normal)
	close(held.next(t).release)
	if res := recv(t, single); res.err != nil || res.wait > time.Second { // a token spent: a minute's wait
		t.Fatalf("single call after the refused batch: wait %v, %v (its token was not given back)", res.wait, res.err)
	} else if _, err := drain(t, res.stream); err != nil {
		t.Fatal(err)
	}
	close(cb.release)
	if res := recv(t, busy); res.err != nil {
		t.Fatal(res.err)
	} else if _, err := drain(t, res.stream); err != nil {
		t.Fatal(err)
	}
	waitState(t, g, "idle", idle)
}

// TestBatchClientGone: a client that leaves stops every member: each backend call's context
// ends, and the lanes come back.
func TestBatchClientGone(t *testing.T) {
	g, held := batchGateway(t, 10)
	ctx, cancel := context.WithCancel(context.Background())
	members, err := g.StartBatch(ctx, []string{"a/x", "a/y", "b/z"}, llm.Normal, batchReq())
	if err != nil {
		t.Fatal(err)
	}
	calls := []*heldCall{held.next(t), held.next(t), held.next(t)}
	cancel()
	for _, c := range calls {
		select {
		case <-c.ctx.Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("the backend call of %s was not cancelled", c.model)
		}
	}
	for _, m := range members {
		if _, err := m.Stream.Next(); !errors.Is(err, context.Canceled) {
			t.Errorf("member %s after the client left: %v", m.Model, err)
		}
		m.Stream.Close()
	}
	waitState(t, g, "idle", idle)
}

// countingBackend answers at once and records how many calls ran at once, per provider and
// in all.
type countingBackend struct {
	name      string
	all       *atomic.Int32
	maxAll    *atomic.Int32
	mine, max atomic.Int32
}

func raise(max *atomic.Int32, n int32) {
	for m := max.Load(); n > m && !max.CompareAndSwap(m, n); m = max.Load() {
	}
}

func (b *countingBackend) Open(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	raise(&b.max, b.mine.Add(1))
	raise(b.maxAll, b.all.Add(1))
	return &countingStream{b: b}, nil
}

type countingStream struct {
	b    *countingBackend
	done bool
	once sync.Once
}

func (s *countingStream) Next() (llm.Chunk, error) {
	if s.done {
		return llm.Chunk{}, io.EOF
	}
	s.done = true
	return llm.Chunk{Content: "ok"}, nil
}

func (s *countingStream) Close() error {
	s.once.Do(func() { s.b.mine.Add(-1); s.b.all.Add(-1) })
	return nil
}

// TestBatchesAmongSingles runs batches and single calls together on a small gateway: no
// cap is ever exceeded, a batch either runs whole or not at all, and nothing is left over.
func TestBatchesAmongSingles(t *testing.T) {
	var all, maxAll atomic.Int32
	var ps []Provider
	var backends []*countingBackend
	for _, name := range []string{"p", "q", "r"} {
		b := &countingBackend{name: name, all: &all, maxAll: &maxAll}
		backends = append(backends, b)
		p := testProvider(name, b, "m", "n")
		p.Lanes, p.QueueLength = 2, 4
		ps = append(ps, p)
	}
	const maxRunning = 4
	g := newTestGateway(t, maxRunning, 12, ps...)
	ctx := context.Background()
	var started, refused, singles atomic.Int32
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() { // single calls, exits after its round
			for i := range 150 {
				model := fmt.Sprintf("%s/%s", ps[(w+i)%3].Name, []string{"m", "n"}[i%2])
				sv, err := g.Start(ctx, model, llm.Priority(i%3), batchReq())
				if err != nil {
					continue // busy answers are fine here
				}
				singles.Add(1)
				for {
					if _, err := sv.Stream.Next(); err != nil {
						break
					}
				}
				sv.Stream.Close()
			}
		})
	}
	for w := range 3 {
		wg.Go(func() { // batches, exits after its round (longer until one has started)
			// A loaded machine can keep the singles' queues full for the whole round, and a
			// batch never passes a queue: then the singles end first, and a batch starts.
			for i := 0; i < 150 || started.Load() == 0 && i < 5000; i++ {
				models := []string{ps[w].Name + "/m", ps[(w+1)%3].Name + "/n"}
				if i%3 == 0 {
					models = append(models, ps[(w+2)%3].Name+"/m")
				}
				members, err := g.StartBatch(ctx, models, llm.Interactive, batchReq())
				if err != nil {
					if k := llm.KindOf(err); k != llm.KindBatchCapacity {
						t.Errorf("batch %v: %v", models, err)
					}
					refused.Add(1)
					continue
				}
				started.Add(1)
				for _, m := range members {
					if m.Err != nil {
						t.Errorf("member %s: %v", m.Model, m.Err)
						continue
					}
					for {
						if _, err := m.Stream.Next(); err != nil {
							break
						}
					}
					m.Stream.Close()
				}
			}
		})
	}
	wg.Wait()
	waitState(t, g, "idle", idle)
	if m := maxAll.Load(); m > maxRunning {
		t.Errorf("%d calls ran at once, max_running %d", m, maxRunning)
	}
	for _, b := range backends {
		if m := b.max.Load(); m > 2 {
			t.Errorf("provider %s ran %d at once with 2 lanes", b.name, m)
		}
	}
	if started.Load() == 0 || refused.Load() == 0 || singles.Load() == 0 {
		t.Errorf("the mix did not reach every case: %d batches started, %d refused, %d singles", started.Load(), refused.Load(), singles.Load())
	}
	t.Logf("%d batches started, %d refused, %d single calls served", started.Load(), refused.Load(), singles.Load())
}

// A batch that needs slots the standing credit of an idle provider holds waits for the
// credit to come back, then runs: the dispatcher counts credit as running, so without the
// recall it would refuse the batch on a gateway that runs nothing.
func TestBatchWaitsForCreditToComeBack(t *testing.T) {
	g, held := batchGateway(t, 2)
	ctx := context.Background()
	one := startAsync(ctx, g, "a/x", llm.Normal) // its grants message gives a credit
	close(held.next(t).release)
	if r := recv(t, one); r.err != nil {
		t.Fatal(r.err)
	} else if _, err := drain(t, r.stream); err != nil {
		t.Fatal(err)
	}
	waitState(t, g, "idle", idle)
	members, err := g.StartBatch(ctx, []string{"a/x", "b/z"}, llm.Normal, batchReq())
	if err != nil {
		t.Fatalf("a batch of 2 on an idle gateway with max_running 2: %v", err)
	}
	for range members {
		close(held.next(t).release)
	}
	for _, m := range members {
		if m.Err != nil {
			t.Fatalf("member %s: %v", m.Model, m.Err)
		}
		if _, err := drain(t, m.Stream); err != nil {
			t.Fatal(err)
		}
	}
	waitState(t, g, "idle", idle)
}
