package anthropic

import (
	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/upstream"
)

// A decoder is the upstream.Decoder of a Messages API event stream. Every real stream starts
// with message_start, which yields only a role chunk: the stream's Prime reads past it, so an
// overloaded_error right after it is an error from Open.
var _ upstream.Decoder = (*decoder)(nil)

// Done reports whether message_stop was seen: it ends the answer.
func (d *decoder) Done() bool { return d.done }

// End explains a stream that stopped before message_stop: cut off, or broken (see
// upstream.EndError).
func (d *decoder) End(out []llm.Chunk, err error) ([]llm.Chunk, error) {
	return out, upstream.EndError(err, d.started, "before message_stop")
}
