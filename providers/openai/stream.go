package openai

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/sse"
	"github.com/tollgate/tollgate/providers/upstream"
	"github.com/tollgate/tollgate/providers/wirejson"
)

// stream relays a backend's SSE answer chunk by chunk.
type stream struct {
	c       *Client
	ctx     context.Context
	cancel  context.CancelFunc // ends the call's own context once the body is closed
	header  http.Header
	body    io.ReadCloser
	r       *sse.Reader
	pending *llm.Chunk // the first chunk, read by Open
	chunks  int
	// finished: a chunk carried a finish reason, so the answer may end without [DONE]
	finished bool
	err      error // sticky: once the stream has ended, Next keeps saying how
	close    sync.Once
}

// Quota is what the answer's headers said of the backend's buckets.
func (s *stream) Quota() llm.Quota { return s.c.quota(s.header) }

// Next returns the next chunk, io.EOF after [DONE], or the error that ended the stream.
func (s *stream) Next() (llm.Chunk, error) {
	if p := s.pending; p != nil {
		s.pending = nil
		return *p, nil
	}
	if s.err != nil {
		return llm.Chunk{}, s.err
	}
	ch, err := s.next()
	if err != nil {
		s.err = err
	}
	return ch, err
}

// Buffered reports whether the next chunk has already arrived in full, so Next will not wait
// for the backend. The relay uses it to let chunks that arrived together share one flush.
func (s *stream) Buffered() bool {
	return s.pending != nil || (s.err == nil && s.r.Ready())
}

// drainWait bounds how long Close reads what follows [DONE] (normally just the end of the
// chunked body, already received) so the connection can go back to the keep-alive pool.
const drainWait = 50 * time.Millisecond

// Close closes the response body, which aborts the HTTP call if it is still running; once
// it returns the connection is no longer read.
func (s *stream) Close() error {
	s.close.Do(func() {
		if s.err == io.EOF {
			s.drain()
		}
		_ = s.body.Close()
		if s.cancel != nil {
			s.cancel()
		}
	})
	return nil
}

// drain reads the rest of a finished body for at most drainWait. A body read to its end lets
// the transport reuse the connection; one that is closed early costs a new TCP (and TLS)
// handshake on the next call.
func (s *stream) drain() {
	done := make(chan struct{})
	go func() { // exits when the body ends or when Close closes it below
		defer close(done)
		_, _ = io.Copy(io.Discard, io.LimitReader(s.body, 64<<10))
	}()
	t := time.NewTimer(drainWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		_ = s.body.Close()
		<-done
	}
}

func (s *stream) next() (llm.Chunk, error) {
	for {
		ev, err := s.r.Next()
		if err != nil {
			return llm.Chunk{}, s.endError(err)
		}
		// JSON's white space only: a frame with a form feed or a no-break space around its
		// object is not JSON, and is refused rather than trimmed into a frame that is.
		data := bytes.Trim(ev.Data, jsonSpace)
		if len(data) == 0 {
			continue
		}
		if bytes.Equal(data, []byte("[DONE]")) {
			return llm.Chunk{}, io.EOF
		}
		f, ok := scanFrame(data)
		if ev.Type == "error" || f.errorish {
			if be, ok := parseError(data); ok {
				return llm.Chunk{}, s.c.bodyError(s.header, be)
			}
			if ev.Type == "error" {
				return llm.Chunk{}, s.c.bodyError(s.header, backendError{msg: s.c.snippet(data)})
			}
		}
		if !ok {
			return llm.Chunk{}, s.c.upstreamError("backend sent a stream frame that is not a JSON object"+reason(data)+": "+s.c.snippet(data), nil)
		}
		ch := llm.Chunk{Raw: append([]byte(nil), data...)}
		inspect(&ch, &f)
		if f.reasoning && !f.reasoningContent {
			ch.Raw = renameReasoning(ch.Raw, "delta")
		}
		s.chunks++
		s.finished = s.finished || ch.FinishReason != ""
		return ch, nil
	}
}

// endError says why reading stopped. The body's end is the answer's end only after a finish
// reason (openai-node too accepts a stream without [DONE]); before one, an answer that had
// started was cut off, whether the backend closed the stream cleanly or mid-event. Our own
// cancellation is returned as the context's error.
func (s *stream) endError(err error) error {
	if s.ctx.Err() != nil {
		return s.ctx.Err()
	}
	if err == io.EOF && s.finished {
		return io.EOF
	}
	// The message never quotes [DONE]: a client that looks for it in the data of an event
	// would take the error event for the stream's end.
	e := upstream.EndError(err, s.chunks > 0, fmt.Sprintf("after %d chunks, without a finish reason or the DONE marker", s.chunks), s.c.secrets...)
	e.Provider = s.c.name
	return e
}

// frame is what one pass over a stream frame found of the names the relay acts on
// (scanFrame). Quotes inside JSON strings are escaped, so a model writing these words in its
// text is never taken for a name.
type frame struct {
	// errorish: a top-level name that makes parseError take the frame for an error (error,
	// error_code, code), so the frame is decoded to see; almost no frame has one.
	errorish bool
	// reasoning, reasoningContent: the names seen anywhere; a bare "reasoning" is renamed.
	reasoning, reasoningContent bool
	// finish: the first finish_reason member, anywhere, in document order.
	finish    wirejson.Member
	hasFinish bool
	// usage, choices: the top-level usage and choices members, when there are.
	usage, choices       wirejson.Member
	hasUsage, hasChoices bool
}

// scanFrame checks that data is one JSON object that names no member twice and finds its
// names of interest in the same pass (wirejson.Scan). Searching the bytes for each name after
// a separate validation was most of what a relayed chunk cost beyond a bare proxy
// (docs/benchmarks.md).
func scanFrame(data []byte) (frame, bool) {
	var f frame
	if len(data) == 0 || data[0] != '{' {
		return f, false
	}
	ok := wirejson.Scan(data, func(m wirejson.Member) {
		switch string(m.Name) {
		case "finish_reason":
			if !f.hasFinish || m.At < f.finish.At { // nested members come before their parent
				f.finish, f.hasFinish = m, true
			}
		case "usage":
			if m.Depth == 1 {
				f.usage, f.hasUsage = m, true
			}
		case "choices":
			if m.Depth == 1 {
				f.choices, f.hasChoices = m, true
			}
		case "reasoning":
			f.reasoning = true
		case "reasoning_content":
			f.reasoningContent = true
		case "error", "error_code", "code":
			f.errorish = f.errorish || m.Depth == 1
		}
	})
	return f, ok
}

// inspect fills the chunk's Usage, UsageOnly and FinishReason from what scanFrame found in
// ch.Raw, as the whole chunk decoded into {choices, usage} would give them. Only a chunk with
// a top-level usage object has usage to decode, which is one chunk per stream; of that one it
// decodes the usage object alone. A usage member nested elsewhere (in a choice, in a
// backend's own extension) is not the chunk's and says nothing either way.
func inspect(ch *llm.Chunk, f *frame) {
	raw := ch.Raw
	if f.hasFinish {
		// Decoded: an escape or a byte that is not UTF-8 in it must not make the reason
		// vanish, and a stream ending after it look cut off.
		if fr, ok := wirejson.String(raw[f.finish.At:f.finish.End]); ok {
			ch.FinishReason = llm.FinishReason(fr)
		}
	}
	if !f.hasUsage || raw[f.usage.At] != '{' {
		return // no usage object at the top, where a chunk's usage is
	}
	usageOnly := true
	if f.hasChoices {
		var ok bool
		if usageOnly, ok = emptyOrNull(raw[f.choices.At:f.choices.End]); !ok {
			return // choices that are not an array: not a chunk's shape, so no usage from it
		}
	}
	var u usageJSON
	if wirejson.Unmarshal(raw[f.usage.At:f.usage.End], &u) != nil {
		return
	}
	ch.Usage, ch.UsageOnly = u.toLLM(), usageOnly
}

// emptyOrNull reports whether the JSON value v (an array or null for ok) has no items.
func emptyOrNull(v []byte) (empty, ok bool) {
	switch {
	case string(v) == "null":
		return true, true
	case v[0] != '[':
		return false, false
	}
	return bytes.TrimLeft(v[1:], jsonSpace)[0] == ']', true
}

// usageJSON is OpenAI's usage object with the details the gateway logs. DeepSeek reports
// cache hits in its own field.
type usageJSON struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
	PromptCacheHitTokens int `json:"prompt_cache_hit_tokens"`
}

func (u *usageJSON) toLLM() *llm.Usage {
	if u == nil {
		return nil
	}
	out := &llm.Usage{
		PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens,
		CachedTokens: u.PromptCacheHitTokens,
	}
	if d := u.PromptTokensDetails; d != nil && d.CachedTokens > 0 {
		out.CachedTokens = d.CachedTokens
	}
	if d := u.CompletionTokensDetails; d != nil {
		out.ReasoningTokens = d.ReasoningTokens
	}
	return out
}
