package upstream

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// Source is a translating adapter's decoder over one answer's event stream.
type Source interface {
	// Fill reads one event and appends the chunks it yields to out (perhaps none). It returns
	// io.EOF, perhaps with final chunks, once the answer is complete; any other error ends
	// the answer.
	Fill(out []llm.Chunk) ([]llm.Chunk, error)
}

// ErrStreamClosed is what Next returns after Close abandoned an answer.
var ErrStreamClosed = errors.New("stream closed")

// ChunkStream is the llm.Stream of a translating adapter (Anthropic, Gemini): the part that
// does not depend on the wire format. It holds the chunks decoded but not yet taken, the
// error that ended the answer, and the body to close. Next and Close are called from one
// goroutine, as llm.Stream says.
type ChunkStream struct {
	provider string
	body     io.ReadCloser
	cancel   context.CancelFunc // ends the call's own context once the body is closed
	src      Source             // nil: a whole answer, decoded before the stream was made
	pending  []llm.Chunk
	err      error // the terminal error, io.EOF after the last chunk
	closed   bool
	quota    llm.Quota
}

var (
	_ llm.Stream        = (*ChunkStream)(nil)
	_ llm.QuotaReporter = (*ChunkStream)(nil)
)

// NewChunkStream returns the stream of an answer src decodes from body. Close closes body
// and then calls cancel (either may be nil). Errors are named for provider.
func NewChunkStream(provider string, body io.ReadCloser, cancel context.CancelFunc, src Source) *ChunkStream {
	return &ChunkStream{provider: provider, body: body, cancel: cancel, src: src, quota: llm.NoQuota}
}

// Chunks returns a stream of chunks already decoded, ending with err (io.EOF for a complete
// answer).
func Chunks(chunks []llm.Chunk, err error) *ChunkStream {
	return &ChunkStream{pending: chunks, err: err, quota: llm.NoQuota}
}

// WithQuota records what the answer's headers said of the backend's buckets (ParseQuota),
// for Quota, and returns s.
func (s *ChunkStream) WithQuota(h http.Header, now time.Time) *ChunkStream {
	s.quota, _ = ParseQuota(h, now)
	return s
}

// Quota is what the answer's headers said of the backend's buckets (llm.QuotaReporter).
func (s *ChunkStream) Quota() llm.Quota { return s.quota }

// Next returns the next chunk; see llm.Stream.
func (s *ChunkStream) Next() (llm.Chunk, error) {
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

// Prime reads until a chunk carries something of the answer (CarriesAnswer), so that an
// error the backend sends right after its 200 headers (an overload, a quota) comes back
// from Open, before the gateway has answered its client, where it can still be retried or
// answered with its own status. A stream that opens with a role chunk (Anthropic's
// message_start) would otherwise reach the client as a 200 with an error event in it. The
// chunks read on the way stay pending for Next. On such an error the stream is closed and
// the error returned. A cancelled call ends the wait: the body read fails.
func (s *ChunkStream) Prime() error {
	for !CarriesAnswer(s.pending) && s.err == nil {
		s.fill()
	}
	if !CarriesAnswer(s.pending) && s.err != nil && !errors.Is(s.err, io.EOF) {
		err := s.err
		s.Close()
		return err
	}
	return nil
}

// fill adds the chunks of the next event to the pending ones, or ends the stream.
func (s *ChunkStream) fill() {
	if s.src == nil {
		s.err = io.EOF
		return
	}
	var err error
	s.pending, err = s.src.Fill(s.pending)
	if err != nil {
		s.err = WithProvider(err, s.provider)
	}
}

// Close closes the response body (aborting the call if it is still running) and returns
// once it is closed. It is safe to call more than once.
func (s *ChunkStream) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	// Chunks decoded but not yet taken are dropped: after Close the answer is abandoned.
	if s.err == nil || len(s.pending) > 0 {
		s.err = ErrStreamClosed
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

// CarriesAnswer reports whether any of chunks holds more than a role: text, reasoning, a tool
// call, a finish reason or usage.
func CarriesAnswer(chunks []llm.Chunk) bool {
	for _, c := range chunks {
		if c.Content != "" || c.ReasoningContent != "" || len(c.ToolCalls) > 0 || c.FinishReason != "" || c.Usage != nil {
			return true
		}
	}
	return false
}

// WithProvider names provider on an *llm.Error that does not name one yet, and returns err.
func WithProvider(err error, provider string) error {
	if e, ok := errors.AsType[*llm.Error](err); ok && e.Provider == "" {
		e.Provider = provider
	}
	return err
}
