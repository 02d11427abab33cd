package upstream

import (
	"context"
	"errors"
	"io"

	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/sse"
)

// Decoder is a vendor's reading of one streamed answer's server-sent events: the part of an
// event stream that depends on the wire format. NewEventStream does the rest.
type Decoder interface {
	// Event decodes one event and appends the chunks it yields to out.
	Event(ev sse.Event, out []llm.Chunk) ([]llm.Chunk, error)
	// Done reports whether the events so far completed the answer: nothing more is read.
	Done() bool
	// End is told why the body stopped before Done: err is io.EOF for a clean end, else the
	// read's error (the call was not cancelled). It returns the answer's last chunks and nil
	// when a clean end completes the answer (a wire that marks no end of its own), or else
	// the error saying what is missing, usually EndError's.
	End(out []llm.Chunk, err error) ([]llm.Chunk, error)
}

// events is the Source of an answer in server-sent events.
type events struct {
	ctx context.Context
	r   *sse.Reader
	dec Decoder
	key string // the call's key, scrubbed from the error of a broken read
}

// NewEventStream returns the stream of the answer in server-sent events that body carries,
// read by dec; see NewChunkStream. maxEvent is the event size limit (0: the reader's
// default). A read that fails because ctx ended reports ctx's error, so the gateway can tell
// a client's disconnect from a backend failure; key is redacted from any other.
func NewEventStream(ctx context.Context, provider string, body io.ReadCloser, cancel context.CancelFunc, dec Decoder,
	maxEvent int, key string) *ChunkStream {
	return NewChunkStream(provider, body, cancel, &events{ctx: ctx, r: sse.NewReaderLimit(body, maxEvent), dec: dec, key: key})
}

// Fill reads one event; see Source.
func (e *events) Fill(out []llm.Chunk) ([]llm.Chunk, error) {
	if e.dec.Done() {
		return out, io.EOF
	}
	ev, err := e.r.Next()
	if err == nil {
		return e.dec.Event(ev, out)
	}
	if ctxErr := e.ctx.Err(); ctxErr != nil {
		return out, ctxErr
	}
	out, err = e.dec.End(out, err)
	if err == nil {
		return out, io.EOF
	}
	return out, scrub(err, e.key)
}

// scrub redacts key from the message and detail of an *llm.Error, and returns err.
func scrub(err error, key string) error {
	if le, ok := errors.AsType[*llm.Error](err); ok {
		le.Message = Redact(le.Message, key)
		le.Detail = Redact(le.Detail, key)
	}
	return err
}
