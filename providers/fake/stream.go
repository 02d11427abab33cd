package fake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// errClosed is what Next returns once the stream is closed.
var errClosed = errors.New("fake: stream closed")

// token is one word of the answer and whether it is reasoning.
type token struct {
	text      string
	reasoning bool
}

// stream plays a Script. Next waits inline (no goroutine), so a stream that is dropped without
// Close leaks nothing but its Active count.
type stream struct {
	ctx    context.Context
	b      *Backend
	req    *llm.Request // for Backend.Hold
	toks   []token
	failAt int        // index of the token before which a midstream failure happens; -1 for none
	fail   *llm.Error // the failure at failAt
	finish llm.FinishReason
	prompt int
	first  time.Duration // wait before the first chunk
	every  time.Duration // wait before each token chunk
	timer  *time.Timer   // reused by the default wait; nil until needed
	pos    int           // next token; -1 before the role chunk
	reason int           // reasoning tokens emitted
	ended  bool          // the final chunk was returned
	err    error         // sticky: the error that ended the stream
	closed atomic.Bool
}

func newStream(ctx context.Context, b *Backend, req *llm.Request, sc Script) *stream {
	s := &stream{ctx: ctx, b: b, req: req, pos: -1, failAt: -1, finish: llm.FinishStop, first: sc.FirstTokenDelay}
	for _, t := range Tokenize(sc.Reasoning) {
		s.toks = append(s.toks, token{text: t, reasoning: true})
	}
	for _, t := range Tokenize(replyFor(sc, req)) {
		s.toks = append(s.toks, token{text: t})
	}
	if limit := req.OutputLimit(); limit > 0 && len(s.toks) > limit {
		s.toks, s.finish = s.toks[:limit], llm.FinishLength
	}
	switch sc.Fail {
	case FailMidstream:
		s.failAt = len(s.toks) / 2
		s.fail = &llm.Error{Kind: llm.KindUpstream, Provider: b.cfg.Name, Message: "fake: stream broken midway",
			UpstreamCode: "server_error"}
	case FailTruncated:
		s.failAt = len(s.toks) / 2
		s.fail = &llm.Error{Kind: llm.KindUpstreamTruncated, Provider: b.cfg.Name,
			Message: "fake: the answer stopped without a finish reason"}
	}
	if sc.TokensPerSecond > 0 {
		s.every = time.Duration(float64(time.Second) / sc.TokensPerSecond)
	}
	s.prompt = promptTokens(req)
	return s
}

// Next returns the role chunk (after Backend.Hold), the reasoning and content chunks, then the
// final chunk with the finish reason and usage, then io.EOF.
func (s *stream) Next() (llm.Chunk, error) {
	if s.closed.Load() {
		return llm.Chunk{}, errClosed
	}
	if s.err != nil {
		return llm.Chunk{}, s.err
	}
	if err := s.ctx.Err(); err != nil {
		return llm.Chunk{}, s.failWith(fmt.Errorf("fake %s: %w", s.b.cfg.Name, err))
	}
	switch {
	case s.pos < 0:
		if s.b.Hold != nil {
			if err := s.b.Hold(s.ctx, s.req); err != nil {
				return llm.Chunk{}, s.failWith(fmt.Errorf("fake %s: hold: %w", s.b.cfg.Name, err))
			}
		}
		if err := s.wait(s.first); err != nil {
			return llm.Chunk{}, err
		}
		s.pos = 0
		return llm.Chunk{Role: "assistant"}, nil
	case s.pos == s.failAt:
		return llm.Chunk{}, s.failWith(s.fail)
	case s.pos < len(s.toks):
		if err := s.wait(s.every); err != nil {
			return llm.Chunk{}, err
		}
		t := s.toks[s.pos]
		s.pos++
		if t.reasoning {
			s.reason++
			return llm.Chunk{ReasoningContent: t.text}, nil
		}
		return llm.Chunk{Content: t.text}, nil
	case !s.ended:
		s.ended = true
		u := &llm.Usage{PromptTokens: s.prompt, CompletionTokens: s.pos, ReasoningTokens: s.reason}
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
		return llm.Chunk{FinishReason: s.finish, Usage: u}, nil
	}
	return llm.Chunk{}, io.EOF
}

// wait pauses d (nothing when d <= 0) unless the call is cancelled first.
func (s *stream) wait(d time.Duration) error {
	if d <= 0 {
		return nil
	}
	var err error
	if s.b.Wait != nil {
		err = s.b.Wait(s.ctx, d)
	} else {
		if s.timer == nil {
			s.timer = time.NewTimer(d)
		} else {
			s.timer.Reset(d) // Go ≥ 1.23: Reset on a fired or stopped timer needs no drain
		}
		select {
		case <-s.ctx.Done():
			s.timer.Stop()
			err = s.ctx.Err()
		case <-s.timer.C:
		}
	}
	if err != nil {
		return s.failWith(fmt.Errorf("fake %s: %w", s.b.cfg.Name, err))
	}
	return nil
}

func (s *stream) failWith(err error) error {
	s.err = err
	return err
}

// Close ends the call. No timer is left running (wait stops its own), so Close only has
// accounting to do. It is idempotent and lowers the backend's Active count exactly once.
func (s *stream) Close() error {
	if s.closed.CompareAndSwap(false, true) {
		s.b.active.Add(-1)
	}
	return nil
}
