package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/providers/llm"
)

// chatRoute is the chat route's pattern, for logs, metrics and spans.
const chatRoute = "/v1/chat/completions"

// chatAPI is POST /v1/chat/completions (chatAnswer).
var chatAPI = &ingress{
	route:  chatRoute,
	native: llm.FormatChat,
	parse:  func(body []byte, _ *http.Request) (*parsed, *apiError) { return only(parseChat(body)) },
	fail:   failOpenAI,
	answer: newChatAnswer,
}

// only is a parsed request of a format whose answer needs nothing beyond the chat request.
func only(req *llm.Request, a *apiError) (*parsed, *apiError) {
	if a != nil {
		return nil, a
	}
	return &parsed{req: req}, nil
}

// readRequest reads what every ingress format shares: the X-Gateway-Priority header and the
// body, bounded by max_body_bytes and body_timeout (readBody).
func (s *Server) readRequest(w http.ResponseWriter, r *http.Request) (llm.Priority, []byte, *apiError) {
	prio, err := llm.ParsePriority(r.Header.Get("X-Gateway-Priority"))
	if err != nil {
		a := invalid("X-Gateway-Priority", "header X-Gateway-Priority: "+err.Error())
		return 0, nil, &a
	}
	body, a := s.readBody(w, r)
	if a != nil {
		return 0, nil, a
	}
	return prio, body, nil
}

// chatDecoded is a chat body as decoded: the request, and prompt_cache_key, which names
// the conversation (SPEC §19) and reaches an OpenAI-compatible backend in the body as sent.
type chatDecoded struct {
	*llm.Request
	PromptCacheKey string `json:"prompt_cache_key"`
}

// parseChat decodes a chat request body and checks the fields the gateway relies on.
func parseChat(body []byte) (*llm.Request, *apiError) {
	req := &llm.Request{}
	in := chatDecoded{Request: req}
	trimmed, a := decodeObject(body, &in)
	if a != nil {
		return nil, a
	}
	req.Body, req.Conversation = trimmed, in.PromptCacheKey
	if a := checkChat(req); a != nil {
		return nil, a
	}
	return req, nil
}

// checkChat checks the fields of a decoded chat request that the gateway relies on. It is
// apart from parseChat so that its locals are not in the frame above the JSON decoder, on
// the HTTP server's connection goroutine (docs/benchmarks.md).
func checkChat(req *llm.Request) *apiError {
	switch {
	case req.Model == "":
		a := invalid("model", "missing required field: model (a model id such as \"demo/echo\"; GET /v1/models lists them)")
		return &a
	case len(req.Messages) == 0:
		a := invalid("messages", "missing required field: messages (a non-empty array of chat messages)")
		return &a
	case req.StreamOptions != nil && !req.Stream:
		a := invalid("stream_options", "stream_options is only allowed when stream is true")
		return &a
	}
	if a := checkChatRanges(req); a != nil {
		return a
	}
	calls := callIDs{}
	for i := range req.Messages {
		if a := checkChatMessage(i, &req.Messages[i], calls); a != nil {
			return a
		}
	}
	return nil
}

// checkChatMessage checks message i: its role, that a tool message answers a call of an
// earlier assistant message (calls, which an assistant message adds its calls to), and its
// images' data: URIs.
func checkChatMessage(i int, m *llm.Message, calls callIDs) *apiError {
	switch m.Role {
	case "system", "developer", "user", "assistant", "tool":
	case "":
		return invalidf(fmt.Sprintf("messages[%d].role", i), "messages[%d].role is missing", i)
	default:
		return invalidf(fmt.Sprintf("messages[%d].role", i),
			"messages[%d].role %q is not one of system, developer, user, assistant, tool", i, m.Role)
	}
	for _, tc := range m.ToolCalls {
		calls[tc.ID] = true
	}
	if m.Role == "tool" {
		param := fmt.Sprintf("messages[%d].tool_call_id", i)
		switch {
		case m.ToolCallID == "":
			return invalidf(param, "%s is required in a tool message (the id of the call it answers)", param)
		case !calls[m.ToolCallID]:
			return invalidf(param, "%s %q names no tool call of an earlier assistant message", param, m.ToolCallID)
		}
	}
	for j, p := range m.Content.Parts {
		if p.ImageURL != nil {
			if a := checkImageURL(fmt.Sprintf("messages[%d].content[%d].image_url.url", i, j), p.ImageURL.URL); a != nil {
				return a
			}
		}
	}
	return nil
}

// servedHeaders sets the SPEC §3 headers every chat answer carries: the queue wait, and the
// model that served the call with the backend attempts it took (when a model was chosen).
func servedHeaders(h http.Header, sv *llm.Served) {
	h.Set("X-Gateway-Queue-Ms", strconv.FormatInt(sv.QueueWait.Milliseconds(), 10))
	if sv.Model != "" {
		h.Set("X-Gateway-Model", sv.Model)
		h.Set("X-Gateway-Attempts", strconv.Itoa(sv.Attempts))
	}
}

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
