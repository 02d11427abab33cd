package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/sse"
	"github.com/tollgate/tollgate/providers/upstream"
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
	if s.pending != nil {
		ch := *s.pending
		s.pending = nil
		return ch, nil
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
		data := bytes.TrimSpace(ev.Data)
		if len(data) == 0 {
			continue
		}
		if bytes.Equal(data, []byte("[DONE]")) {
			return llm.Chunk{}, io.EOF
		}
		if ev.Type == "error" || mayBeError(data) {
			if be, ok := parseError(data); ok {
				return llm.Chunk{}, s.c.bodyError(s.header, be)
			}
			if ev.Type == "error" {
				return llm.Chunk{}, s.c.bodyError(s.header, backendError{msg: s.c.snippet(data)})
			}
		}
		if data[0] != '{' || !upstream.Valid(data) {
			return llm.Chunk{}, s.c.upstreamError("backend sent a stream frame that is not a JSON object: "+s.c.snippet(data), nil)
		}
		ch := llm.Chunk{Raw: append([]byte(nil), data...)}
		if hasBareReasoning(data) {
			ch.Raw = renameReasoning(ch.Raw, "delta")
		}
		inspect(&ch)
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
	e := upstream.EndError(err, s.chunks > 0, fmt.Sprintf("after %d chunks, without a finish reason or the DONE marker", s.chunks))
	e.Provider, e.Message = s.c.name, upstream.Redact(e.Message, s.c.secrets...)
	return e
}

// inspect fills the chunk's Usage, UsageOnly and FinishReason from Raw. It only decodes when a
// cheap scan shows a usage object, which is one chunk per stream; every other chunk costs two
// byte searches.
func inspect(ch *llm.Chunk) {
	raw := ch.Raw
	if fr, ok := stringAfterKey(raw, `"finish_reason"`); ok {
		ch.FinishReason = llm.FinishReason(fr)
	}
	if !objectAfterKey(raw, `"usage"`) {
		return
	}
	var info struct {
		Choices []json.RawMessage `json:"choices"`
		Usage   *usageJSON        `json:"usage"`
	}
	if json.Unmarshal(raw, &info) != nil || info.Usage == nil {
		return
	}
	ch.Usage = info.Usage.toLLM()
	ch.UsageOnly = len(info.Choices) == 0
}

// valueAfterKey returns the bytes after `key:` (whitespace skipped) for the first occurrence of
// key as an object key, or nil. Quotes inside JSON strings are escaped, so an unescaped key
// with its colon can only be a real key.
func valueAfterKey(raw []byte, key string) []byte {
	for off := 0; ; {
		i := bytes.Index(raw[off:], []byte(key))
		if i < 0 {
			return nil
		}
		rest := bytes.TrimLeft(raw[off+i+len(key):], " \t\r\n")
		if len(rest) > 0 && rest[0] == ':' {
			return bytes.TrimLeft(rest[1:], " \t\r\n")
		}
		off += i + len(key)
	}
}

func objectAfterKey(raw []byte, key string) bool {
	v := valueAfterKey(raw, key)
	return len(v) > 0 && v[0] == '{'
}

// stringAfterKey returns the value of key when it is a plain string (no escapes), as
// finish_reason values are.
func stringAfterKey(raw []byte, key string) (string, bool) {
	v := valueAfterKey(raw, key)
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	end := bytes.IndexAny(v[1:], `"\`)
	if end < 0 || v[1+end] != '"' {
		return "", false
	}
	return string(v[1 : 1+end]), true
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
