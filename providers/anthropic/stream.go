package anthropic

import (
	"context"
	"errors"
	"io"

	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/sse"
)

// stream is an answer being read from a Messages API event stream, or (body nil) a whole
// answer already decoded into chunks.
type stream struct {
	ctx      context.Context
	provider string
	cancel   context.CancelFunc // ends the call's own context once the body is closed
	body     io.ReadCloser
	events   *sse.Reader
	dec      *decoder
	pending  []llm.Chunk
	err      error // the terminal error, io.EOF after the last chunk
	closed   bool
}

var _ llm.Stream = (*stream)(nil)

// Next returns the next chunk; see llm.Stream.
func (s *stream) Next() (llm.Chunk, error) {
	for len(s.pending) == 0 {
		if s.err != nil {
			return llm.Chunk{}, s.err
		}
		s.fill()
	}
	c := s.pending[0]
	s.pending = s.pending[1:]
	return c, nil
}

// prime reads until the first chunk that carries something of the answer, so that an error
// the backend sends right after its 200 headers (an overload, a quota) comes back from Open,
// before the gateway has answered its client, where it can still be retried or answered with
// its own status. Every real stream starts with message_start, which only yields a role
// chunk, so stopping at the first chunk would let an overloaded_error right after it reach
// the client as a 200 stream. The chunks read on the way stay pending for Next. On such an
// error the stream is closed. Cancelling the call's context ends the wait: the body read
// fails and Open returns the context's error.
func (s *stream) prime() error {
	for !carriesAnswer(s.pending) && s.err == nil {
		s.fill()
	}
	if !carriesAnswer(s.pending) && s.err != nil && !errors.Is(s.err, io.EOF) {
		err := s.err
		s.Close()
		return err
	}
	return nil
}

// carriesAnswer reports whether any of chunks holds more than a role: text, reasoning, a tool
// call, a finish reason or usage.
func carriesAnswer(chunks []llm.Chunk) bool {
	for _, c := range chunks {
		if c.Content != "" || c.ReasoningContent != "" || len(c.ToolCalls) > 0 || c.FinishReason != "" || c.Usage != nil {
			return true
		}
	}
	return false
}

// fill reads one event, adding the chunks it yields to the pending ones, or ends the stream.
func (s *stream) fill() {
	if s.dec == nil || s.dec.done || s.closed {
		s.err = io.EOF
		if s.closed && (s.dec == nil || !s.dec.done) {
			s.err = errClosed
		}
		return
	}
	ev, err := s.events.Next()
	if err != nil {
		s.err = withProvider(s.readError(err), s.provider)
		return
	}
	// Appended to what is pending: empty in Next, the role chunk and the like in prime.
	s.pending, err = s.dec.event(ev, s.pending)
	s.err = withProvider(err, s.provider)
}

// withProvider names the provider on an *llm.Error that does not name one yet.
func withProvider(err error, provider string) error {
	if e, ok := errors.AsType[*llm.Error](err); ok && e.Provider == "" {
		e.Provider = provider
	}
	return err
}

var errClosed = errors.New("anthropic: stream closed")

// readError explains why reading the event stream failed. A cancelled call reports the
// context's error, so the gateway can tell a client's disconnect from a backend failure.
func (s *stream) readError(err error) error {
	if ctxErr := s.ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		// Not wrapping io.EOF: a caller testing errors.Is(err, io.EOF) would take the
		// truncated answer for a complete one.
		return &llm.Error{Kind: llm.KindUpstream, Message: "stream ended before message_stop", Err: io.ErrUnexpectedEOF}
	}
	return &llm.Error{Kind: llm.KindUpstream, Message: "reading stream: " + err.Error(), Err: err}
}

// Close closes the response body (aborting the call if it is still running) and returns
// once it is closed. It is safe to call more than once.
func (s *stream) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	// Chunks decoded but not yet taken are dropped: after Close the answer is abandoned.
	if s.err == nil || len(s.pending) > 0 {
		s.err = errClosed
	}
	s.pending = nil
	var err error
	if s.body != nil {
		err = s.body.Close()
	}
	if s.cancel != nil {
		s.cancel()
	}
	return err
}
