package httpapi

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/tollgate/tollgate/providers/llm"
)

// messagesAPI is POST /v1/messages.
var messagesAPI = &ingress{
	route:    "/v1/messages",
	native:   llm.FormatMessages,
	terminal: map[string]bool{"message_stop": true, "error": true},
	parse:    func(body []byte, r *http.Request) (*parsed, *apiError) { return only(parseMessages(body, r)) },
	fail:     failMessages,
	answer: func(_ *Server, p *parsed, rec *record) answerFormat {
		return newMessagesAnswer(rec.id, p.req.Model)
	},
}

// stream is the answer as Messages events.
func (a *messagesAnswer) stream(out *eventOut) streamSink {
	a.emit = out.emit
	return a
}

// whole is the answer as one message.
func (a *messagesAnswer) whole() wholeSink { return a }

// build is the whole answer's message once every chunk is in.
func (a *messagesAnswer) build() (any, error) {
	_ = a.end() // without emit it only closes the blocks
	return a.message(true), nil
}

// anthropicTypes is the one table from a SPEC §4 code to Anthropic's error.type, which its
// SDKs and Claude Code read beside the status. Codes not listed take the status's type.
var anthropicTypes = map[string]string{
	"invalid_request":                 "invalid_request_error",
	"batch_exceeds_provider_capacity": "invalid_request_error",
	"batch_too_large":                 "invalid_request_error",
	"upstream_invalid_request":        "invalid_request_error",
	"invalid_api_key":                 "authentication_error",
	"model_not_found":                 "not_found_error",
	"not_found":                       "not_found_error",
	"method_not_allowed":              "invalid_request_error",
	"request_too_large":               "request_too_large",
	"request_header_too_large":        "request_too_large",
	"request_timeout":                 "timeout_error",
	"provider_queue_full":             "rate_limit_error",
	"provider_queue_timeout":          "rate_limit_error",
	"gateway_overloaded":              "rate_limit_error",
	"batch_capacity_unavailable":      "rate_limit_error",
	"upstream_rate_limited":           "rate_limit_error",
	"upstream_quota_exhausted":        "billing_error",
	"upstream_error":                  "api_error",
	"upstream_truncated":              "api_error",
	"upstream_auth_failed":            "api_error",
	"provider_unavailable":            "overloaded_error",
	"gateway_draining":                "api_error",
	"provider_run_timeout":            "timeout_error",
}

// anthropicStatusTypes is Anthropic's error.type for a status, for codes the table lacks.
var anthropicStatusTypes = map[int]string{
	400: "invalid_request_error", 401: "authentication_error", 402: "billing_error",
	403: "permission_error", 404: "not_found_error", 413: "request_too_large",
	429: "rate_limit_error", 503: "overloaded_error", 504: "timeout_error",
}

// messagesErrorBody is Anthropic's error shape with Tollgate's fields added (SPEC §13).
type messagesErrorBody struct {
	Type  string          `json:"type"` // "error"
	Error messagesErrorIn `json:"error"`
}

type messagesErrorIn struct {
	Type         string  `json:"type"`
	Message      string  `json:"message"`
	Code         string  `json:"code"`
	Param        *string `json:"param,omitempty"`
	Provider     *string `json:"provider,omitempty"`
	RetryAfterMs *int64  `json:"retry_after_ms,omitempty"`
}

func messagesError(a apiError) messagesErrorBody {
	typ, ok := anthropicTypes[a.code]
	if !ok {
		typ, ok = anthropicStatusTypes[a.status]
	}
	if !ok {
		typ = "api_error"
	}
	d := a.body().Error
	e := messagesErrorIn{Type: typ, Message: d.Message, Code: d.Code, Param: d.Param, Provider: d.Provider,
		RetryAfterMs: d.RetryAfterMs}
	return messagesErrorBody{Type: "error", Error: e}
}

// failMessages writes an error answer in Anthropic's shape, with the headers of SPEC §4.
func failMessages(w http.ResponseWriter, a apiError) { a.writeBody(w, messagesError(a)) }

// ModelResolver is the optional capability of a Gateway that tells, without starting a call,
// whether a model name leads to a model: count_tokens answers an unknown one as /v1/messages
// would.
type ModelResolver interface {
	// Resolve returns the error Start would refuse a call on model with for its name (a
	// model_not_found *llm.Error), or nil; see actors.Gateway.Resolve.
	Resolve(model string, req *llm.Request) error
}

// countTokens serves POST /v1/messages/count_tokens: the request is read as /v1/messages reads
// it (so a bad one gets the same 400) and its prompt estimated as admission estimates it
// (llm.EstimatePromptTokens); Tollgate has no tokenizer for every backend's model.
func (s *Server) countTokens(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	_, body, aerr := s.readRequest(w, r)
	var req *llm.Request
	if aerr == nil {
		req, aerr = decodeMessages(body, r, true)
	}
	if aerr != nil {
		failMessages(w, *aerr)
		return
	}
	if mr, ok := s.opts.Gateway.(ModelResolver); ok {
		if err := mr.Resolve(req.Model, req); err != nil {
			failMessages(w, toAPIError(err, 0)) // the 404 /v1/messages answers for the model
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]int{"input_tokens": llm.EstimatePromptTokens(req)})
}
