package httpapi

import (
	"net/http"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/providers/llm"
)

// record is what the request's log line says.
type record struct {
	id, route             string
	model, provider, code string
	detail                string // the failure as the log tells it, when the client's message leaves things out
	servedBy              string // the model that served (or refused) it: not the asked one after a fallback or a route
	fallbacks             []string
	affinity              string // llm.Served.Affinity: "hit", "moved", "new" or ""
	attempts              int
	prio                  llm.Priority
	stream, clientGone    bool
	status                int
	start                 time.Time
	queue, ttfb           time.Duration
	usage                 llm.Usage
	span                  trace.Span   // nil when not tracing
	client                string       // the client key's name; "" for the anonymous client
	asked                 llm.Priority // the class asked for, when the key's max_priority lowered it
	lowered               bool
	cost                  float64 // USD, from the ledger
}

// served records what the gateway said about the call.
func (r *record) served(sv *llm.Served) {
	r.queue, r.attempts, r.fallbacks, r.affinity = sv.QueueWait, sv.Attempts, sv.Fallbacks, sv.Affinity
	if sv.Provider != "" {
		r.provider = sv.Provider
	}
	r.servedBy = sv.Model
}

func (r *record) fail(a apiError) {
	r.status, r.code, r.detail = a.status, a.code, a.detail
	if a.provider != "" {
		r.provider = a.provider
	}
}

func (s *Server) logChat(r *record) {
	if r.clientGone && s.stopping.Load() {
		r.clientGone = false // the drain stopped the call and closes the connection (Stopping)
		r.fail(toAPIError(&llm.Error{Kind: llm.KindDraining}, 0))
	}
	s.account(r, r.finalStatus())
	status, duration := s.logLine(r)
	endSpan(r.span, r, status)
	s.observe(r, status, duration)
}

// status is the answer's status as logged: 499 for a client that left.
func (r *record) finalStatus() int {
	switch {
	case r.clientGone:
		return 499 // nginx's "client closed request": not the backend's failure
	case r.status == 0:
		return http.StatusOK
	}
	return r.status
}

// logLine writes the request's log line and returns its status and duration.
func (s *Server) logLine(r *record) (int, time.Duration) {
	status := r.finalStatus()
	ev := s.opts.Logger.Info()
	if status >= 500 && status != 499 {
		ev = s.opts.Logger.Warn()
	}
	duration := s.opts.Now().Sub(r.start)
	ev.Str("request_id", r.id).Str("route", r.route).Str("model", r.model).Str("provider", r.provider).Str("priority", r.prio.String()).
		Bool("stream", r.stream).Int("status", status).Str("code", r.code).
		Int64("queue_ms", r.queue.Milliseconds()).Int64("ttfb_ms", r.ttfb.Milliseconds()).
		Int64("duration_ms", duration.Milliseconds()).
		Int("tokens_in", r.usage.PromptTokens).Int("tokens_cached", r.usage.CachedTokens).Int("tokens_out", r.usage.CompletionTokens).
		Int("attempts", r.attempts).Str("served_model", r.servedBy).Strs("fallbacks", r.fallbacks).
		Bool("client_disconnect", r.clientGone).Str("client", r.client).Float64("cost_usd", r.cost)
	if r.lowered {
		ev.Str("priority_asked", r.asked.String()) // the key's max_priority lowered it
	}
	if r.detail != "" {
		ev.Str("error", r.detail)
	}
	if r.affinity != "" {
		ev.Str("affinity", r.affinity)
	}
	ev.Msg("chat")
	return status, duration
}

// observe hands the request's outcome to Options.Observe.
func (s *Server) observe(r *record, status int, duration time.Duration) {
	if s.opts.Observe == nil {
		return
	}
	code := r.code
	if r.clientGone {
		code = ""
	}
	s.opts.Observe(Outcome{Route: r.route, Model: r.servedBy, Provider: r.provider, Status: status, Code: code,
		Attempts: r.attempts, QueueWait: r.queue, TTFB: r.ttfb, Duration: duration, Usage: r.usage,
		Client: r.client, CostUSD: r.cost})
}
