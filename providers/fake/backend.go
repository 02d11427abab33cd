package fake

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// Backend is the scripted fake. Its function fields are test seams; set them before the first
// Open and leave them alone afterwards.
type Backend struct {
	cfg Config

	// OnOpen, when set, runs at the start of every Open, after Calls is counted and before
	// the call is active. It may block (honouring ctx or not), panic, or fail: a non-nil
	// error is returned by Open as is.
	OnOpen func(ctx context.Context, req *llm.Request) error
	// Wait waits d or until ctx is done, returning ctx.Err() then. Nil means a real timer.
	// Tests replace it to see the pacing without sleeping.
	Wait func(ctx context.Context, d time.Duration) error
	// Hold, when set, runs in a stream's first Next, before its first chunk and its
	// FirstTokenDelay: the call has started (Open returned, so the gateway has given it its
	// lanes and the client its headers) and produced nothing yet. It may block, and should
	// return when ctx is done; a non-nil error ends the stream with it, as a backend that
	// fails before its first token. Tests hold calls here until they release them.
	Hold func(ctx context.Context, req *llm.Request) error

	calls     atomic.Int64
	active    atomic.Int64
	maxActive atomic.Int64
}

var (
	_ llm.Backend     = (*Backend)(nil)
	_ llm.ModelLister = (*Backend)(nil)
)

// New returns a Backend following cfg. cfg.Models is not copied; do not change it afterwards.
func New(cfg Config) *Backend {
	return &Backend{cfg: cfg}
}

// Calls returns how many times Open has been called.
func (b *Backend) Calls() int64 { return b.calls.Load() }

// Active returns how many calls are open: Open succeeded and Close was not called yet.
func (b *Backend) Active() int { return int(b.active.Load()) }

// MaxActive returns the highest Active seen since New.
func (b *Backend) MaxActive() int { return int(b.maxActive.Load()) }

// ListModels returns the names of cfg.Models, sorted.
func (b *Backend) ListModels(ctx context.Context) ([]llm.ModelInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("fake %s: list models: %w", b.cfg.Name, err)
	}
	names := make([]string, 0, len(b.cfg.Models))
	for name := range b.cfg.Models {
		names = append(names, name)
	}
	sort.Strings(names)
	models := make([]llm.ModelInfo, len(names))
	for i, name := range names {
		models[i] = llm.ModelInfo{ID: name}
	}
	return models, nil
}

// Open starts a scripted answer to req. Failures injected before the first chunk come back
// here as *llm.Error; a "hang" script blocks until ctx is done and returns its error.
func (b *Backend) Open(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	b.calls.Add(1)
	if b.OnOpen != nil {
		if err := b.OnOpen(ctx, req); err != nil {
			return nil, err
		}
	}
	sc, ok := b.cfg.Models[req.Model]
	if !ok {
		sc = b.cfg.Default
	}
	switch sc.Fail {
	case FailNone, FailMidstream, FailTruncated:
	case FailHang:
		<-ctx.Done()
		return nil, fmt.Errorf("fake %s: hang: %w", b.cfg.Name, ctx.Err())
	default:
		return nil, b.failure(sc)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("fake %s: open: %w", b.cfg.Name, err)
	}
	s := newStream(ctx, b, req, sc)
	b.enter()
	return s, nil
}

// enter counts a call as active and raises the high-water mark if needed.
func (b *Backend) enter() {
	n := b.active.Add(1)
	for {
		m := b.maxActive.Load()
		if n <= m || b.maxActive.CompareAndSwap(m, n) {
			return
		}
	}
}

// failure builds the error of a script's pre-stream failure, shaped like what a real adapter
// makes of the matching HTTP answer.
func (b *Backend) failure(sc Script) *llm.Error {
	e := &llm.Error{Provider: b.cfg.Name}
	switch sc.Fail {
	case FailRateLimited:
		e.Kind, e.UpstreamStatus, e.UpstreamCode = llm.KindUpstreamRateLimited, http.StatusTooManyRequests, "rate_limit_exceeded"
		e.Message, e.RetryAfter = "fake: rate limited", sc.RetryAfter
	case FailUnavailable:
		e.Kind, e.UpstreamStatus, e.UpstreamCode = llm.KindProviderUnavailable, http.StatusServiceUnavailable, "unavailable"
		e.Message = "fake: backend unavailable"
	case FailInvalid:
		e.Kind, e.UpstreamStatus, e.UpstreamCode = llm.KindUpstreamInvalid, http.StatusBadRequest, "invalid_request_error"
		e.Message = "fake: invalid request"
	case FailAuth:
		e.Kind, e.UpstreamStatus, e.UpstreamCode = llm.KindUpstreamAuth, http.StatusUnauthorized, "invalid_api_key"
		e.Message = "fake: invalid api key"
	case FailQuota:
		e.Kind, e.UpstreamStatus, e.UpstreamCode = llm.KindUpstreamQuota, http.StatusTooManyRequests, "insufficient_quota"
		e.Message = "fake: quota exhausted"
	case FailUpstream:
		e.Kind, e.UpstreamStatus, e.UpstreamCode = llm.KindUpstream, http.StatusInternalServerError, "server_error"
		e.Message = "fake: upstream error"
	default:
		e.Kind = llm.KindUpstream
		e.Message = fmt.Sprintf("fake: unknown fail mode %q", sc.Fail)
	}
	return e
}

// replyFor returns the script's reply, or the demo echo when it has none.
func replyFor(sc Script, req *llm.Request) string {
	if sc.Reply != "" {
		return sc.Reply
	}
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if m := req.Messages[i]; m.Role == "user" {
			if text := strings.TrimSpace(m.Content.PlainText()); text != "" {
				return demoGreeting + " You said: " + text
			}
			break
		}
	}
	return demoGreeting
}

// promptTokens approximates the prompt's size as the number of words in its messages.
func promptTokens(req *llm.Request) int {
	n := 0
	for _, m := range req.Messages {
		n += len(strings.Fields(m.Content.PlainText()))
		n += len(strings.Fields(m.ReasoningContent))
		for _, tc := range m.ToolCalls {
			n += len(strings.Fields(tc.Function.Arguments)) + 1
		}
	}
	return n
}
