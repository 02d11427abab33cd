package gemini

import (
	"errors"
	"io"

	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/sse"
	"github.com/tollgate/tollgate/providers/upstream"
)

// A decoder is the upstream.Decoder of streamGenerateContent?alt=sse.
var _ upstream.Decoder = (*decoder)(nil)

// Event decodes one event's response object; see upstream.Decoder.
func (d *decoder) Event(ev sse.Event, out []llm.Chunk) ([]llm.Chunk, error) {
	return d.event(ev.Data, out)
}

// Done is false: Gemini marks no end, so the answer is read to the body's end.
func (d *decoder) Done() bool { return false }

// End finishes the answer at the body's clean end (finish); a read that broke off cuts it
// off (see upstream.EndError).
func (d *decoder) End(out []llm.Chunk, err error) ([]llm.Chunk, error) {
	if errors.Is(err, io.EOF) {
		return d.finish(out)
	}
	return out, upstream.EndError(err, d.started, "before a finish reason")
}
