package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tollgate/tollgate/providers/llm"
)

// Why a backend call's context was cancelled; a stream turns the cause into the client's answer.
var (
	errClientGone = errors.New("client disconnected")
	errRunTimeout = errors.New("run_timeout exceeded")
	errStopped    = errors.New("request actor stopped")
)

// finished, from a stream's Close to its request actor: the backend has stopped.
type finished struct{}

// requestActor owns one running call's cancellation: it turns the client's hang-up, or its own
// stopping (a lane restart, a shutdown), into cancellation of the backend. The call's context,
// its run_timeout and its stream are made by the lane actor (newStream), which answers the
// waiting Start; Start opens the backend in the caller's goroutine, never in Receive.
type requestActor struct {
	g         *Gateway
	c         *call
	cancel    context.CancelCauseFunc
	stopWatch func() bool
}

func newRequestActor(g *Gateway, c *call, cancel context.CancelCauseFunc) *requestActor {
	return &requestActor{g: g, c: c, cancel: cancel}
}

func (a *requestActor) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		root, self := a.g.system.Root, ctx.Self()
		// The watcher turns the client's hang-up into a message (at once if the client has
		// already gone); stopWatch unregisters it.
		a.stopWatch = context.AfterFunc(a.c.ctx, func() { root.Send(self, &clientGone{}) })
	case *clientGone:
		a.cancel(errClientGone)
	case *finished:
		ctx.Stop(ctx.Self())
	case *actor.Stopping:
		if a.stopWatch != nil {
			a.stopWatch()
		}
		a.cancel(errStopped) // a no-op when the call already ended
	}
}

// newStream makes a started call's context (cancellable with a cause; the run_timeout is a
// timer on it rather than a second context) and its stream.
func newStream(g *Gateway, c *call) (*stream, context.CancelCauseFunc) {
	// Without the request context's cancellation but with its values (its trace span, so the
	// backend's traceparent continues the client's trace): the client's hang-up reaches the
	// call as a message to the request actor, which cancels it with a cause.
	bctx, cancel := context.WithCancelCause(context.WithoutCancel(c.ctx))
	timer := time.AfterFunc(c.route.timeout, func() { cancel(errRunTimeout) })
	return &stream{g: g, c: c, ctx: bctx, timer: timer}, cancel
}

// stream is the running call as the HTTP layer sees it: the backend's stream, with errors
// explained by why the call was cancelled, and a Close that gives the lanes back.
type stream struct {
	g     *Gateway
	c     *call
	ctx   context.Context
	timer *time.Timer // the run timeout
	self  *actor.PID
	inner llm.Stream // nil until open succeeds
	// hint is inner's optional Buffered capability, looked up once at open: the relay asks
	// after every chunk.
	hint   interface{ Buffered() bool }
	closed bool
}

// open calls the backend. On failure the call is over: its lanes are given back and the
// error is explained by why the call was cancelled, if it was.
func (s *stream) open() error {
	inner, err := s.safeOpen()
	if err != nil {
		s.closed = true
		err = s.explain(err) // before finish: the request actor's stop cancels the context
		s.finish()
		return err
	}
	s.inner = inner
	s.hint, _ = inner.(interface{ Buffered() bool })
	return nil
}

// safeOpen turns a panicking adapter into an error instead of a crashed process.
func (s *stream) safeOpen() (st llm.Stream, err error) {
	defer func() {
		if r := recover(); r != nil {
			st, err = nil, &llm.Error{Kind: llm.KindUpstream, Provider: s.c.route.provider,
				Message: fmt.Sprintf("internal fault in the %s adapter: %v", s.c.route.provider, r)}
		}
	}()
	return s.c.route.backend.Open(s.ctx, s.c.req)
}

// Next returns the backend's next chunk, with a cancelled call's error explained.
func (s *stream) Next() (llm.Chunk, error) {
	ch, err := s.inner.Next()
	if err != nil {
		return ch, s.explain(err)
	}
	return ch, nil
}

// Buffered reports whether the backend's next chunk has already arrived, when the adapter can
// tell (an optional capability of llm.Stream); false otherwise.
func (s *stream) Buffered() bool { return s.hint != nil && s.hint.Buffered() }

// Close stops the backend if needed, waits until it has stopped, and only then gives the
// lanes back. It is safe to call more than once.
func (s *stream) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	var err error
	if s.inner != nil {
		err = s.inner.Close()
	}
	s.finish()
	return err
}

func (s *stream) finish() {
	s.timer.Stop()
	root := s.g.system.Root
	root.Send(s.g.supervisor, &release{id: s.c.id})
	root.Send(s.self, &finished{})
}

// explain maps an error seen after the call's context was cancelled to what the client is
// told; other errors pass through.
func (s *stream) explain(err error) error {
	cause := context.Cause(s.ctx)
	switch {
	case cause == nil: // not cancelled: the backend's own error
		return err
	case errors.Is(cause, errRunTimeout):
		return &llm.Error{Kind: llm.KindRunTimeout, Provider: s.c.route.provider,
			Message: fmt.Sprintf("%s ran past its run_timeout (%s) and was stopped", s.c.route.id, s.c.route.timeout)}
	case errors.Is(cause, errClientGone):
		return context.Canceled
	case s.g.Draining():
		return &llm.Error{Kind: llm.KindDraining, Provider: s.c.route.provider, Message: "the gateway is shutting down"}
	default:
		return &llm.Error{Kind: llm.KindUpstream, Provider: s.c.route.provider,
			Message: "internal fault: the request's lane was restarted; the backend call was stopped"}
	}
}
