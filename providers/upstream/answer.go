package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/sse"
	"github.com/tollgate/tollgate/providers/wirejson"
)

// ReadAnswer reads a whole non-streaming answer of at most max bytes from body. It tells the
// ways a body goes wrong apart, so that none is taken for an answer: the caller's
// cancellation comes back as ctx's error; a body that broke off before its declared end (after
// some of it arrived), or a JSON object or array that stops before it closes, is a truncated
// answer
// (llm.KindUpstreamTruncated); a body over max and any other read failure are upstream
// errors. Errors name provider; secrets are scrubbed from their messages.
func ReadAnswer(ctx context.Context, provider string, body io.Reader, max int64, secrets ...string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(body, max+1))
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.Is(err, io.ErrUnexpectedEOF) && len(b) > 0:
		return nil, &llm.Error{Kind: llm.KindUpstreamTruncated, Provider: provider,
			Message: fmt.Sprintf("the answer broke off after %d bytes", len(b)), Err: err}
	case err != nil:
		return nil, TransportError(ctx, provider, "reading the answer", err, secrets...)
	case int64(len(b)) > max:
		return nil, &llm.Error{Kind: llm.KindUpstream, Provider: provider,
			Message: fmt.Sprintf("the answer is larger than %d bytes", max)}
	case cutJSON(b):
		return nil, &llm.Error{Kind: llm.KindUpstreamTruncated, Provider: provider,
			Message: fmt.Sprintf("the answer's JSON stops before its end, after %d bytes", len(b)), Err: io.ErrUnexpectedEOF}
	}
	return b, nil
}

// cutJSON reports whether b opens a JSON object or array that ends before it closes: what a
// backend that closed its connection cleanly in the middle of an answer leaves.
func cutJSON(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && (b[0] == '{' || b[0] == '[') && wirejson.Cut(b)
}

// EndError explains why a backend's event stream stopped before the answer's end marker,
// once the caller has ruled out its own cancellation. A stream that ended, cleanly or in the
// middle of an event, after the answer had started is a truncated answer: how says what was
// missing ("before message_stop"). One that ended before anything of an answer, an event
// over the reader's size limit and any other broken read are the backend's failure. The
// error never wraps io.EOF: a caller testing errors.Is(err, io.EOF) would take the cut-off
// answer for a complete one. secrets are scrubbed from its Message and Detail, as from every
// backend error.
func EndError(err error, started bool, how string, secrets ...string) *llm.Error {
	ended := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
	switch {
	case ended && started:
		return &llm.Error{Kind: llm.KindUpstreamTruncated, Message: "the stream ended " + how, Err: io.ErrUnexpectedEOF}
	case ended:
		return &llm.Error{Kind: llm.KindUpstream, Message: "the stream ended before any event of an answer", Err: io.ErrUnexpectedEOF}
	case errors.Is(err, sse.ErrEventTooLarge):
		return &llm.Error{Kind: llm.KindUpstream, Message: Redact("the backend sent an event over the size limit (max_event_bytes): "+err.Error(), secrets...), Err: err}
	}
	return &llm.Error{Kind: llm.KindUpstream, Message: Redact("reading the stream: "+clientText(err), secrets...),
		Detail: Redact("reading the stream: "+err.Error(), secrets...), Err: err}
}
