package actors

import (
	"context"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/providers/llm"
)

// heldBackend is a backend whose calls the test releases one by one. Open returns at once;
// the stream's first Next blocks until the test releases the call or its context ends.
type heldBackend struct {
	mu       sync.Mutex
	opened   chan *heldCall
	active   atomic.Int32
	max      atomic.Int32
	calls    atomic.Int32
	cancels  atomic.Int32
	panicked atomic.Bool
}

type heldCall struct {
	model   string
	ctx     context.Context
	release chan struct{}
	closed  chan struct{}
	once    sync.Once
}

func newHeld() *heldBackend { return &heldBackend{opened: make(chan *heldCall, 1000)} }

func (b *heldBackend) Open(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	b.calls.Add(1)
	n := b.active.Add(1)
	for {
		m := b.max.Load()
		if n <= m || b.max.CompareAndSwap(m, n) {
			break
		}
	}
	c := &heldCall{model: req.Model, ctx: ctx, release: make(chan struct{}), closed: make(chan struct{})}
	b.opened <- c
	return &heldStream{b: b, c: c}, nil
}

type heldStream struct {
	b    *heldBackend
	c    *heldCall
	sent bool
}

func (s *heldStream) Next() (llm.Chunk, error) {
	if s.sent {
		return llm.Chunk{}, io.EOF
	}
	select {
	case <-s.c.release:
		s.sent = true
		return llm.Chunk{Content: "ok " + s.c.model}, nil
	case <-s.c.ctx.Done():
		s.b.cancels.Add(1)
		return llm.Chunk{}, s.c.ctx.Err()
	}
}

func (s *heldStream) Close() error {
	s.c.once.Do(func() {
		s.b.active.Add(-1)
		close(s.c.closed)
	})
	return nil
}

// patience is how long a test waits for what must happen soon (an answer, a state) before it
// fails: what these waits catch is "never", so the bound is generous, for a machine loaded
// with other test runs under -race, where 2 s was once not enough.
const patience = 10 * time.Second

// next waits for the backend to see a call.
func (b *heldBackend) next(t *testing.T) *heldCall {
	t.Helper()
	select {
	case c := <-b.opened:
		return c
	case <-time.After(patience):
		t.Fatalf("backend saw no call within %v", patience)
		return nil
	}
}

// noCall asserts the backend sees no call now (the gate has had time to process what was sent:
// callers sync through State first).
func (b *heldBackend) noCall(t *testing.T) {
	t.Helper()
	select {
	case c := <-b.opened:
		t.Fatalf("backend unexpectedly called for %s", c.model)
	default:
	}
}

type provOpt func(*Provider)

func testProvider(name string, b llm.Backend, models ...string) Provider {
	p := Provider{Name: name, Kind: "test", Backend: b, Lanes: 1, QueueLength: 8,
		QueueTimeout: time.Minute, RunTimeout: time.Minute}
	for _, m := range models {
		p.Models = append(p.Models, Model{Name: m, Lanes: 1})
	}
	return p
}

func newTestGateway(t *testing.T, maxRunning, maxAdmitted int, ps ...Provider) *Gateway {
	t.Helper()
	return newWatchedGateway(t, nil, maxRunning, maxAdmitted, ps...)
}

// newWatchedGateway is newTestGateway with mw on every actor's mailbox (nil: none).
func newWatchedGateway(t *testing.T, mw actor.MailboxMiddleware, maxRunning, maxAdmitted int, ps ...Provider) *Gateway {
	t.Helper()
	log := zerolog.Nop()
	if os.Getenv("TOLLGATE_TEST_LOG") != "" {
		log = zerolog.New(zerolog.NewTestWriter(t))
	}
	var mws []actor.MailboxMiddleware
	if mw != nil {
		mws = append(mws, mw)
	}
	return gatewayOf(t, Options{MaxRunning: maxRunning, MaxAdmitted: maxAdmitted, Providers: ps, Logger: log}, mws...)
}

// gatewayOf is a gateway of o, with mws on every actor's mailbox, shut down when the test
// ends.
func gatewayOf(t *testing.T, o Options, mws ...actor.MailboxMiddleware) *Gateway {
	t.Helper()
	g, err := newGateway(o, mws...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := g.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return g
}

// result is what one background Start ended with.
type result struct {
	stream llm.Stream
	wait   time.Duration
	err    error
}

// startAsync runs Start in a goroutine (which exits when Start returns) and returns its result channel.
func startAsync(ctx context.Context, g *Gateway, model string, prio llm.Priority) chan result {
	ch := make(chan result, 1)
	go func() {
		sv, err := g.Start(ctx, model, prio, &llm.Request{Model: model, Messages: []llm.Message{{Role: "user", Content: llm.Content{Text: "hi"}}}})
		ch <- result{sv.Stream, sv.QueueWait, err}
	}()
	return ch
}

func recv(t *testing.T, ch chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(patience):
		t.Fatalf("no answer within %v", patience)
		return result{}
	}
}

// drain reads a stream to its end and closes it.
func drain(t *testing.T, s llm.Stream) (text string, err error) {
	t.Helper()
	defer s.Close()
	for {
		ch, err := s.Next()
		if err == io.EOF {
			return text, nil
		}
		if err != nil {
			return text, err
		}
		text += ch.Content
	}
}

// waitState polls /admin/state until cond holds or 2s pass.
func waitState(t *testing.T, g *Gateway, what string, cond func(AdminState) bool) AdminState {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		st := g.State()
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("state never reached %q: %+v", what, st)
		}
		time.Sleep(time.Millisecond) // polling with a deadline, not synchronisation
	}
}

func idle(st AdminState) bool { return st.Running == 0 && st.Queued == 0 }

// okStream answers "ok" and ends.
type okStream struct{ sent bool }

func (s *okStream) Next() (llm.Chunk, error) {
	if s.sent {
		return llm.Chunk{}, io.EOF
	}
	s.sent = true
	return llm.Chunk{Role: "assistant", Content: "ok"}, nil
}

func (s *okStream) Close() error { return nil }
