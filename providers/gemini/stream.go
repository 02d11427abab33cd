package gemini

import (
	"context"
	"errors"
	"io"

	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/sse"
	"github.com/tollgate/tollgate/providers/upstream"
)

// events decodes streamGenerateContent?alt=sse; upstream.ChunkStream holds what it yields.
type events struct {
	ctx context.Context
	r   *sse.Reader
	key string   // the call's key, scrubbed from a broken read's error
	dec *decoder // nil once the answer is finished
}

// newStream returns the stream of the answer in body; see upstream.NewChunkStream.
// maxEvent is the SSE event size limit (0: the reader's default).
func newStream(ctx context.Context, provider string, body io.ReadCloser, cancel context.CancelFunc, dec *decoder, maxEvent int, key string) *upstream.ChunkStream {
	return upstream.NewChunkStream(provider, body, cancel, &events{ctx: ctx, r: sse.NewReaderLimit(body, maxEvent), dec: dec, key: key})
}

// Fill reads one event; see upstream.Source. Gemini marks no end: the body's clean end after
// a finish reason is the end of the answer.
func (e *events) Fill(out []llm.Chunk) ([]llm.Chunk, error) {
	if e.dec == nil {
		return out, io.EOF
	}
	ev, err := e.r.Next()
	switch {
	case errors.Is(err, io.EOF) && e.ctx.Err() == nil:
		out, err = e.dec.finish(out)
		e.dec = nil
		if err != nil {
			return out, err
		}
		return out, io.EOF
	case err != nil:
		return out, e.readError(err)
	}
	return e.dec.event(ev.Data, out)
}

// readError explains why reading the event stream failed (see upstream.EndError). A
// cancelled call reports the context's error, so the gateway can tell a client's disconnect
// from a backend failure.
func (e *events) readError(err error) error {
	if ctxErr := e.ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	return upstream.EndError(err, e.dec != nil && e.dec.started, "before a finish reason", e.key)
}
