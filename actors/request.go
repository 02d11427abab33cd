package actors

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tollgate/tollgate/actors/policy"
	"github.com/tollgate/tollgate/actors/replicas"
	"github.com/tollgate/tollgate/providers/llm"
)

// Why a backend call's context was cancelled; a stream turns the cause into the client's answer.
var (
	errClientGone = errors.New("client disconnected")
	errRunTimeout = errors.New("run_timeout exceeded")
	errStopped    = errors.New("request actor stopped")
	errDraining   = errors.New("the gateway is shutting down")
)

// requestActor owns one running call's cancellation: the call's hang-up watcher tells it that
// the client left (clientGone), and it cancels the backend; its stopping while it does (a
// fault in it) cancels the call too. The call's stream, context, run timer and watcher are
// made by the lane actor (newStream), which also stops what runs on it when it stops itself
// (a shutdown); Start opens the backend in the caller's goroutine, never in Receive.
//
// A request actor serves one call at a time and its lane recycles it for the next one (see
// laneActor.requester): spawning and stopping an actor per call was a large part of an
// admission cycle's CPU (docs/benchmarks.md). It is handed a call by being named the stream's
// (stream.self), not by a message, so a call that ends without a hang-up costs it nothing. A
// hang-up carries its stream, so a late one of the previous call cannot reach the next.
type requestActor struct {
	g *Gateway
	s *stream // the call whose hang-up it is handling; nil otherwise
}

func (a *requestActor) Receive(ctx actor.Context) {
	msg := ctx.Message()
	if m, ok := msg.(*clientGone); ok {
		a.s = m.s // first: a fault while it handles the hang-up still cancels the call
	}
	if a.s != nil && !a.s.c.route.slot.down.Load() {
		a.g.faults.hit(faultRequest, a.s.c.route.provider, a.s.c.route.model, msg)
	}
	switch msg.(type) {
	case *clientGone:
		a.s.cancel(errClientGone) // a no-op when the call already ended
		a.s = nil
	case *actor.Stopping:
		if a.s != nil {
			// Marked before the cancellation whose release reaches the lane, so the lane
			// never recycles this actor for the next call (its Terminated comes later).
			a.s.requesterStopping.Store(true)
			a.s.cancel(errStopped)
			a.s = nil
		}
	}
}

// stream is the running call as the HTTP layer sees it: the backend's stream, with errors
// explained by why the call was cancelled, and the lanes given back the moment the backend
// has stopped.
//
// The lanes are tied to the backend, not to the client's socket (SPEC §2): when the call
// ends by cancellation (client gone, run_timeout, a stopping request actor, a drain) the
// backend is closed and the lanes are given back at once by the reaper, even while the
// HTTP handler is blocked writing to a client that does not read; when the backend ends the
// stream itself (its last chunk, an error), the handler's Next sees it and closes it then.
type stream struct {
	g    *Gateway
	c    *call
	run  *start // what its provider started it with
	lane *actor.PID
	// self is the request actor serving the call, which its hang-up watcher tells: the lane
	// names another when it stops (laneActor.requesterStopped). stopWatch unregisters the
	// watcher once the call has ended.
	self      atomic.Pointer[actor.PID]
	stopWatch func() bool
	// requesterStopping: self is stopping (it failed, or the gateway stops); set before the
	// release it causes, read by the lane.
	requesterStopping atomic.Bool
	ctx               context.Context
	cancelCtx         context.CancelCauseFunc
	timer             *time.Timer // the run timeout

	// mu guards inner and closed between the HTTP handler (Next, Close) and the reaper, and
	// the attempts below. A reaper waits at most for a Next in progress or a retry's wait,
	// which its cancellation ends.
	mu        sync.Mutex
	inner     llm.Stream // nil until open succeeds
	closed    bool
	hint      interface{ Buffered() bool } // inner's optional capability, looked up once at open
	opened    bool
	abandoned bool

	// The call's attempts on this start (open): the key of the current one, how many were
	// made and how many of the retries backed off, and the keys tried (a bit each).
	key      int
	attempts int
	backoffs int
	tried    uint64
	usage    llm.Usage // the last usage the backend reported
	// failed is the failure the ending reports: a backend error after it answered, or the
	// last failed attempt's, which its provider may already have recorded when asked.
	failed error
	// leased: the call holds leases on the replicas' shared limits, which charged the
	// shared buckets charged (its retries charge them again: sharedbuckets.go).
	leased  bool
	charged []replicas.Bucket
	// done is the stream's one released message and free its freed, written as it finishes
	// and never after: values in the stream's own memory, so that the ending costs no
	// allocation. ended is set before either is sent (a lane rebuilding's report leaves the
	// call out once it is).
	done  released
	free  freed
	ended atomic.Bool
}

// newStream makes a started call's context (cancellable with a cause, derived from the
// client's so that values such as the trace span reach the adapters, but not its
// cancellation: that goes through the request actor), the watcher that turns the client's
// hang-up into a message to the request actor requester (at once if the client has already
// gone), and arms its run timer. run is what its provider started it with; leased and
// charged its hold on the replicas' shared limits.
func newStream(g *Gateway, c *call, run *start, charged []replicas.Bucket, leased bool, lane, requester *actor.PID) *stream {
	bctx, cancel := context.WithCancelCause(context.WithoutCancel(c.ctx))
	s := &stream{g: g, c: c, run: run, lane: lane, ctx: bctx, cancelCtx: cancel, key: run.key, leased: leased, charged: charged}
	s.self.Store(requester)
	root := g.system.Root
	s.stopWatch = context.AfterFunc(c.ctx, func() { send(root, s.self.Load(), &clientGone{s: s}) })
	s.timer = time.AfterFunc(run.timeout, func() { s.cancel(errRunTimeout) })
	return s
}

// cancel stops the call with cause: the backend's context is cancelled and the reaper
// closes the backend and frees the lanes without waiting for the HTTP handler. Every
// cancellation goes through here (the request actor, the run timer, a drain), so the reaper
// costs a goroutine only for calls that are cancelled.
func (s *stream) cancel(cause error) {
	if s.ctx.Err() != nil {
		return // cancelled already, or ended
	}
	s.cancelCtx(cause)
	go s.reap() // exits once the backend is closed, or at once when the call had ended
}

// open calls the backend, and tries again as the provider decides while nothing has reached
// the client (SPEC §10): after each failed attempt it asks its provider actor (retryAsk),
// which records what the failure says of the key and the backend and answers with the next
// key and the wait, or with a capacity requeue, or with the error to end with. Retries live
// here and nowhere else: the adapters and their HTTP clients make one attempt per Open, so
// attempts never multiply. The call keeps its lanes while it retries.
//
// On failure the call is over: its lanes are given back and the error is explained by why
// the call was cancelled, if it was. A requeue ends this start too and returns *requeued,
// whose call Start admits again.
func (s *stream) open() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if s.closed {
			return s.explain(context.Cause(s.ctx))
		}
		inner, err := s.safeOpen()
		s.attempts++
		if s.key < 64 {
			s.tried |= 1 << s.key
		}
		if err == nil {
			s.inner, s.opened = inner, true
			s.hint, _ = inner.(interface{ Buffered() bool })
			return nil
		}
		// The decision is a call of its own so that its locals are not in this frame while
		// the next attempt waits for the backend (the stack of the HTTP server's connection
		// goroutine, docs/benchmarks.md).
		if err := s.afterFailure(err); err != nil {
			return err
		}
	}
}

// afterFailure decides what follows a failed attempt, with s.mu held: nil for another
// attempt (after its wait), else the error that ends this start, which has finished the
// call (a *requeued for a capacity refusal).
func (s *stream) afterFailure(err error) error {
	if s.ctx.Err() != nil {
		err = s.explain(err) // before finish: finishing cancels the context
		s.finishLocked()
		return err
	}
	s.failed = err // the ending's to record, unless the provider records it when asked
	ans := s.ask(err)
	switch {
	case ans.retry:
		if ans.backoff {
			s.backoffs++
		}
		s.key, s.failed, s.charged = ans.key, nil, ans.charged
		if s.wait(ans.wait) {
			return nil
		}
		err = s.explain(err)
	case ans.requeue:
		s.done.requeued = true // its next arrival frees its lanes: the lane tells the provider only in case it never comes
		end := s.finishLocked()
		return &requeued{next: s.c.again(policy.ID(s.g.nextID.Add(1)), s.attempts, s.run, end)}
	default:
		if ans.err != nil {
			err = ans.err
		}
		err = s.explain(err)
	}
	s.finishLocked()
	return err
}

// requeued ends a start whose call goes back to its queue: the backend refused it for
// capacity, which is not the client's fault. next is the call Start admits again.
type requeued struct{ next *call }

func (r *requeued) Error() string { return "requeued after the backend refused the call for capacity" }

// ask reports a failed attempt to the provider actor and waits for its decision; a call
// cancelled meanwhile (or a gateway stopping) ends with the attempt's error. Whether the
// failure was recorded is the provider's to say (run.recorded): an answer from a crash's
// strategy or a rebuild records nothing, and the ending then records it (settle).
func (s *stream) ask(err error) retryAnswer {
	reply := make(chan retryAnswer, 1)
	send(s.g.system.Root, s.c.route.slot.pid.Load(), &retryAsk{c: s.c, err: err, key: s.key, n: s.attempts,
		attempts: s.c.attempts + s.attempts, backoffs: s.backoffs, tried: s.tried, leased: s.leased, charged: s.charged, reply: reply})
	select {
	case ans := <-reply:
		return ans
	case <-s.ctx.Done():
	case <-s.g.stopped:
	}
	return retryAnswer{}
}

// wait waits d before a retry, holding the lanes; false when the call was cancelled first.
func (s *stream) wait(d time.Duration) bool {
	if d <= 0 {
		return s.ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.ctx.Done():
		return false
	}
}

// safeOpen makes one attempt on the current key, turning a panicking adapter into an error
// instead of a crashed process.
func (s *stream) safeOpen() (st llm.Stream, err error) {
	defer func() {
		if r := recover(); r != nil {
			st, err = nil, &llm.Error{Kind: llm.KindUpstream, Provider: s.c.route.provider,
				Message: fmt.Sprintf("internal fault in the %s adapter: %v", s.c.route.provider, r)}
		}
	}()
	if kb := s.run.keyed; kb != nil {
		return kb.OpenWithKey(s.ctx, s.c.req, s.key)
	}
	return s.run.backend.Open(s.ctx, s.c.req)
}

// Next returns the backend's next chunk, with a cancelled call's error explained. The
// stream's end or error frees the lanes at once: the backend is done.
func (s *stream) Next() (llm.Chunk, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return llm.Chunk{}, s.explain(context.Cause(s.ctx))
	}
	ch, err := s.inner.Next()
	if err != nil {
		if err != io.EOF && context.Cause(s.ctx) == nil {
			s.failed = err // the backend's own failure, not a stop of ours
		}
		err = s.explain(err)
		_ = s.inner.Close()
		s.finishLocked()
		return ch, err
	}
	if ch.Usage != nil {
		s.usage = *ch.Usage
	}
	return ch, nil
}

// Buffered reports whether the backend's next chunk has already arrived, when the adapter can
// tell (an optional capability of llm.Stream); false otherwise.
func (s *stream) Buffered() bool { return s.hint != nil && s.hint.Buffered() }

// Close stops the backend if needed, waits until it has stopped, and gives the lanes back if
// that has not happened yet. It is safe to call more than once.
func (s *stream) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	var err error
	if s.inner != nil {
		err = s.inner.Close()
	}
	s.finishLocked()
	return err
}

// reap closes a cancelled call's backend and frees its lanes without waiting for the HTTP
// handler, which may be blocked writing to a client that does not read.
func (s *stream) reap() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || (!s.opened && !s.abandoned) {
		return // not opened yet: open sees the cancellation and finishes
	}
	if s.inner != nil {
		_ = s.inner.Close()
	}
	s.finishLocked()
}

// abandon stops a stream that Start will never open (its call was answered otherwise).
func (s *stream) abandon() {
	s.mu.Lock()
	s.abandoned = true
	s.mu.Unlock()
	if s.ctx.Err() == nil {
		s.cancelCtx(errStopped)
	}
	s.reap()
}

// finishLocked gives the lanes back: the backend has stopped. Called with mu held, once. What
// the call's provider needs of its ending goes with the release, and is returned.
//
// The provider is told directly (freed), before anything of the answer's end reaches the
// client: a client that sends its next call the moment it has its answer finds the lanes
// free, rather than racing a release that goes through the lane first. The lane is told
// first (released), so that a lane asked what runs on it by a rebuilding provider has seen
// the release whenever the provider has seen the freed (laneActor, reportRunning). A
// capacity requeue is the exception: its next arrival frees the lanes in the same step as
// it queues the call again, so the provider hears of it from that arrival, or from the
// lane when there is none (a reload removed the provider meanwhile).
func (s *stream) finishLocked() ending {
	s.closed = true
	s.ended.Store(true)
	s.timer.Stop()
	s.stopWatch()
	s.done = released{c: s.c, requeued: s.done.requeued,
		end: ending{attempts: s.attempts, key: s.key, opened: s.opened, err: s.failed, usage: s.usage, charged: s.charged}}
	end := &s.done.end
	if end.opened {
		if qr, ok := s.inner.(llm.QuotaReporter); ok {
			if q := qr.Quota(); q.Known() {
				end.quota = &q
			}
		}
	}
	if s.ctx.Err() == nil {
		s.cancelCtx(context.Canceled) // releases the context's resources; the call has ended
	}
	root := s.g.system.Root
	send(root, s.lane, &s.done)
	if !s.done.requeued {
		s.free = freed{c: s.c, end: end}
		send(root, s.c.route.slot.pid.Load(), &s.free)
	}
	return *end
}

// explain maps an error seen after the call's context was cancelled to what the client is
// told; other errors pass through.
func (s *stream) explain(err error) error {
	cause := context.Cause(s.ctx)
	switch {
	case cause == nil || cause == context.Canceled: // not cancelled, or ended normally
		return err
	case errors.Is(cause, errRunTimeout):
		return &llm.Error{Kind: llm.KindRunTimeout, Provider: s.c.route.provider,
			Message: fmt.Sprintf("%s ran past its run_timeout (%s) and was stopped", s.c.route.id, s.run.timeout)}
	case errors.Is(cause, errClientGone):
		return context.Canceled
	case errors.Is(cause, errProviderFailed):
		return providerDown(s.c.route.provider)
	case errors.Is(cause, errDraining) || s.g.Draining():
		return &llm.Error{Kind: llm.KindDraining, Provider: s.c.route.provider, Message: "the gateway is shutting down"}
	default:
		return &llm.Error{Kind: llm.KindUpstream, Provider: s.c.route.provider,
			Message: "internal fault: the request's actor stopped; the backend call was stopped"}
	}
}
