package openai

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/sse"
	"github.com/tollgate/tollgate/providers/upstream"
	"github.com/tollgate/tollgate/providers/wirejson"
)

// maxCompletion caps a non-streaming answer held in memory. Far above any real completion;
// it only stops a broken backend from making us buffer without end.
const maxCompletion = 32 << 20

// Open sends req to {base}/chat/completions. It returns once the backend has answered with its
// first chunk (a stream) or its whole body (no stream), so that an error the backend reports
// before any content — by HTTP status, inside a 200 body, or as the first stream frame —
// comes back from Open as an *llm.Error and the gateway can still answer with a proper status.
// Cancelling ctx aborts the HTTP call at any point. The keys are used in turn.
func (c *Client) Open(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	return c.up.Keys().OpenTurn(ctx, req, c.open)
}

// OpenWithKey is Open with key i of the model's keys (llm.KeyedBackend).
func (c *Client) OpenWithKey(ctx context.Context, req *llm.Request, i int) (llm.Stream, error) {
	return c.up.Keys().OpenKey(ctx, req, i, c.open)
}

// A request that came in as Responses goes to {base}/responses as sent when the backend
// speaks Responses (openResponses); embeddings and legacy completions go to their own
// endpoints (surface.go).
func (c *Client) open(ctx context.Context, req *llm.Request, key string) (llm.Stream, error) {
	switch req.Op() {
	case llm.FormatEmbeddings:
		return c.openEmbeddings(ctx, req, key)
	case llm.FormatCompletions:
		return c.openCompletions(ctx, req, key)
	}
	if n := req.NativeFor(llm.FormatResponses); n != nil && c.speaksResponses() {
		return c.openResponses(ctx, req, n, key)
	}
	body, err := requestBody(req)
	if err != nil {
		return nil, &llm.Error{Kind: llm.KindInvalidRequest, Provider: c.name, Message: err.Error(), Err: err}
	}
	resp, cancel, err := c.post(ctx, upstream.Call{Path: "/chat/completions", Body: body, Key: key, Stream: req.Stream})
	if err != nil {
		return nil, err
	}
	return c.answer(ctx, req, resp, cancel)
}

// answer reads the start of a 2xx answer to req: the whole body, or a stream's first chunk.
// It is a call of its own so that its locals are not in open's frame while the call waits
// for the backend's headers (the stack of the HTTP server's connection goroutine,
// docs/benchmarks.md). cancel ends the call's context once the body is closed.
func (c *Client) answer(ctx context.Context, req *llm.Request, resp *http.Response, cancel context.CancelFunc) (llm.Stream, error) {
	if !req.Stream {
		return c.whole(ctx, resp, cancel, resp.Body, false)
	}
	br := bufio.NewReaderSize(resp.Body, sse.BufferSize) // shared with the SSE reader
	if isJSONBody(br) {
		// Qianfan and DashScope answer a stream request they refuse with a plain JSON
		// error body; reading it whole turns that into an error from Open.
		return c.whole(ctx, resp, cancel, br, true)
	}
	return c.startStream(ctx, resp, cancel, br)
}

// startStream reads a stream's first chunk from br, on resp's body, so that an error the
// backend sends first comes back from Open.
func (c *Client) startStream(ctx context.Context, resp *http.Response, cancel context.CancelFunc, br *bufio.Reader) (llm.Stream, error) {
	s := &stream{c: c, ctx: ctx, cancel: cancel, header: resp.Header, body: resp.Body, r: sse.NewReaderLimit(br, c.maxEvent)}
	first, err := s.next()
	if err != nil && err != io.EOF {
		_ = s.Close()
		return nil, err
	}
	if err == nil {
		s.pending = &first
	} else {
		s.err = io.EOF // [DONE] before any chunk: an empty answer, but a clean one
	}
	return s, nil
}

// whole reads a whole answer from r (resp's body, or a reader on it) and closes the body;
// a stream request's answer (stream set: a backend that ignored "stream") is given to the
// client as chunks anyway.
func (c *Client) whole(ctx context.Context, resp *http.Response, cancel context.CancelFunc, r io.Reader, stream bool) (llm.Stream, error) {
	defer cancel()
	defer resp.Body.Close()
	l := &chunkList{chunks: make([]llm.Chunk, 1)}
	if err := c.readComplete(ctx, resp.Header, r, &l.chunks[0]); err != nil {
		return nil, err
	}
	if stream {
		l.chunks = completionToChunks(&l.chunks[0])
	}
	l.quota = c.quota(resp.Header)
	return l, nil
}

// isJSONBody sniffs whether a 200 answer to a stream request is a plain JSON document rather
// than SSE: its first non-blank byte is '{' (an SSE stream starts with a field or a comment).
func isJSONBody(br *bufio.Reader) bool {
	for {
		b, err := br.Peek(1)
		if err != nil {
			return false
		}
		switch b[0] {
		case ' ', '\t', '\r', '\n':
			// Leading blank lines are keep-alives; they mean nothing in either format.
			_, _ = br.Discard(1)
			continue
		}
		return b[0] == '{'
	}
}

// jsonSpace is JSON's white space (RFC 8259 §2), the only bytes a backend's JSON may have
// around its value; bytes.TrimSpace would also take Unicode's (\v, \f, U+0085, U+00A0, ...).
const jsonSpace = " \t\r\n"

// readComplete reads a whole chat.completion body into ch, as a Complete chunk.
func (c *Client) readComplete(ctx context.Context, h http.Header, r io.Reader, ch *llm.Chunk) error {
	b, err := upstream.ReadAnswer(ctx, c.name, r, maxCompletion, c.secrets...)
	if err != nil {
		return err
	}
	// DeepSeek writes blank lines while a request waits in its queue. JSON's white space
	// only, as in a stream frame (jsonSpace).
	b = bytes.Trim(b, jsonSpace)
	if len(b) == 0 {
		return c.upstreamError("backend answered 200 with an empty body", nil)
	}
	if b[0] != '{' {
		return c.notObject(b)
	}
	facts, err := decodeCompletion(b)
	if err != nil && !wirejson.Valid(b) {
		return c.notObject(b)
	}
	if err != nil || facts.choices != 1 {
		// An error body (Qianfan's, DashScope's, a 200 from a proxy) never has a
		// completion's shape, so only an answer of another shape is looked at for one.
		if be, ok := parseError(b); ok {
			return c.bodyError(h, be)
		}
	}
	if hasBareReasoning(b) {
		b = renameReasoning(b, "message")
	}
	*ch = llm.Chunk{Raw: b, Complete: true}
	if err == nil { // else JSON of another shape than a chat.completion's: relayed as it is
		ch.Usage, ch.FinishReason = facts.usage, facts.finish
	}
	return nil
}

// notObject is the error for a 200 answer b that is not a JSON object, or one that names a
// member twice (wirejson); the message says which.
func (c *Client) notObject(b []byte) error {
	return c.upstreamError("backend answered 200 with a body that is not a JSON object"+reason(b)+": "+c.snippet(b), nil)
}

// reason is " with each name once" and the name when b, refused by wirejson, is JSON but
// for a name given twice in an object; "" otherwise (b is not JSON at all).
func reason(b []byte) string {
	if err := wirejson.Check(b); errors.Is(err, wirejson.ErrDuplicateName) {
		return " with each name once (" + err.Error() + ")"
	}
	return ""
}

func (c *Client) upstreamError(msg string, err error) *llm.Error {
	return &llm.Error{Kind: llm.KindUpstream, Provider: c.name, Message: upstream.Redact(msg, c.secrets...), Err: err}
}

// chunkList is the stream of an answer read whole before Open returned.
type chunkList struct {
	chunks []llm.Chunk
	quota  llm.Quota
}

var (
	_ llm.QuotaReporter = (*chunkList)(nil)
	_ llm.QuotaReporter = (*stream)(nil)
)

// Quota is what the answer's headers said of the backend's buckets.
func (l *chunkList) Quota() llm.Quota { return l.quota }

// quota reads an answer's rate-limit headers (llm.NoQuota when it sent none).
func (c *Client) quota(h http.Header) llm.Quota {
	q, _ := upstream.ParseQuota(h, c.clock())
	return q
}

func (l *chunkList) Next() (llm.Chunk, error) {
	if len(l.chunks) == 0 {
		return llm.Chunk{}, io.EOF
	}
	ch := l.chunks[0]
	l.chunks = l.chunks[1:]
	return ch, nil
}

// Close has nothing to stop: the body was read and closed before Open returned.
func (l *chunkList) Close() error { return nil }
