package anthropic

import (
	"context"
	"io"

	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/sse"
	"github.com/tollgate/tollgate/providers/upstream"
)

// events decodes a Messages API event stream; upstream.ChunkStream holds what it yields.
// Every real stream starts with message_start, which yields only a role chunk: the stream's
// Prime reads past it, so an overloaded_error right after it is an error from Open.
type events struct {
	ctx context.Context
	r   *sse.Reader
	key string // the call's key, scrubbed from a broken read's error
	dec *decoder
}

// newStream returns the stream of the answer in body; see upstream.NewChunkStream.
// maxEvent is the SSE event size limit (0: the reader's default).
func newStream(ctx context.Context, provider string, body io.ReadCloser, cancel context.CancelFunc, dec *decoder, maxEvent int, key string) *upstream.ChunkStream {
	return upstream.NewChunkStream(provider, body, cancel, &events{ctx: ctx, r: sse.NewReaderLimit(body, maxEvent), dec: dec, key: key})
}

// Fill reads one event; see upstream.Source. message_stop ends the answer.
func (e *events) Fill(out []llm.Chunk) ([]llm.Chunk, error) {
	if e.dec.done {
		return out, io.EOF
	}
	ev, err := e.r.Next()
	if err != nil {
		return out, e.readError(err)
	}
	return e.dec.event(ev, out)
}

// readError explains why reading the event stream failed (see upstream.EndError). A
// cancelled call reports the context's error, so the gateway can tell a client's disconnect
// from a backend failure.
func (e *events) readError(err error) error {
	if ctxErr := e.ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	return upstream.EndError(err, e.dec.started, "before message_stop", e.key)
}
