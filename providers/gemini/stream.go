package gemini

import (
	"context"
	"errors"
	"io"

	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/sse"
)

// stream is an answer being read from streamGenerateContent?alt=sse, or (body nil) a whole
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

var errClosed = errors.New("gemini: stream closed")

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

// prime reads until the first chunk, so that an error the backend sends right after its
// 200 headers (an overload, a quota) comes back from Open, before the gateway has answered
// its client, where it can still be retried or answered with its own status. On such an
// error the stream is closed.
func (s *stream) prime() error {
	for len(s.pending) == 0 && s.err == nil {
		s.fill()
	}
	if len(s.pending) == 0 && s.err != nil && !errors.Is(s.err, io.EOF) {
		err := s.err
		s.Close()
		return err
	}
	return nil
}

// fill reads events until one yields chunks or the stream ends. Gemini marks no end: the
// body's clean end after a finish reason is the end of the answer.
func (s *stream) fill() {
	switch {
	case s.dec == nil:
		s.err = io.EOF
		return
	case s.closed:
		s.err = errClosed
		return
	}
	ev, err := s.events.Next()
	switch {
	case errors.Is(err, io.EOF) && s.ctx.Err() == nil:
		s.pending, err = s.dec.finish(s.pending[:0])
		s.err = io.EOF
		if err != nil {
			s.err = withProvider(err, s.provider)
		}
		s.dec = nil
	case err != nil:
		s.err = withProvider(s.readError(err), s.provider)
	default:
		s.pending, err = s.dec.event(ev.Data, s.pending[:0])
		s.err = withProvider(err, s.provider)
	}
}

// readError explains why reading the event stream failed. A cancelled call reports the
// context's error, so the gateway can tell a client's disconnect from a backend failure.
func (s *stream) readError(err error) error {
	if ctxErr := s.ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	return &llm.Error{Kind: llm.KindUpstream, Message: "reading stream: " + err.Error(), Err: err}
}

// withProvider names the provider on an *llm.Error that does not name one yet.
func withProvider(err error, provider string) error {
	if e, ok := errors.AsType[*llm.Error](err); ok && e.Provider == "" {
		e.Provider = provider
	}
	return err
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
