package anthropic

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/upstream"
)

// apiError is the "error" object of Anthropic's error body and of an in-stream error event.
type apiError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	Details struct {
		ErrorCode string `json:"error_code"`
	} `json:"details"`
}

// errorBody is {"type":"error","error":{...}}.
type errorBody struct {
	Error *apiError `json:"error"`
}

// kindForType maps Anthropic's error.type onto an error kind; "" when the type is unknown
// and the HTTP status has to decide.
func kindForType(e *apiError) (llm.Kind, bool) {
	switch e.Type {
	case "rate_limit_error":
		// A monthly spend cap arrives as a 429 too, but waiting a minute does not lift it.
		if e.Details.ErrorCode == "enforced_spend_limit_reached" ||
			strings.Contains(strings.ToLower(e.Message), "spend limit") {
			return llm.KindUpstreamQuota, true
		}
		return llm.KindUpstreamRateLimited, true
	case "overloaded_error":
		return llm.KindProviderUnavailable, true
	case "billing_error":
		return llm.KindUpstreamQuota, true
	case "authentication_error", "permission_error":
		return llm.KindUpstreamAuth, true
	case "invalid_request_error", "not_found_error", "request_too_large":
		return llm.KindUpstreamInvalid, true
	case "api_error", "timeout_error":
		return llm.KindUpstream, true
	}
	return llm.KindUpstream, false
}

// statusError builds the error for a non-2xx answer from the body and headers. key is the
// key used for the call, redacted from anything the backend echoes back.
func (c *Client) statusError(status int, h http.Header, body []byte, key string) *llm.Error {
	e := &llm.Error{Provider: c.name, UpstreamStatus: status, Kind: upstream.KindForStatus(status)}
	var eb errorBody
	if json.Unmarshal(body, &eb) == nil && eb.Error != nil && (eb.Error.Type != "" || eb.Error.Message != "") {
		if k, ok := kindForType(eb.Error); ok {
			e.Kind = k
		}
		e.UpstreamCode = eb.Error.Type
		e.Message = eb.Error.Message
	}
	if e.Message == "" {
		e.Message = fmt.Sprintf("HTTP %d: %s", status, upstream.Snippet(body, key))
	}
	e.Message = upstream.Redact(e.Message, key)
	if e.Kind == llm.KindUpstreamAuth {
		e.KeyInvalid = upstream.KeyInvalid(e.UpstreamCode, e.Message)
	}
	if e.Kind == llm.KindUpstreamRateLimited || e.Kind == llm.KindProviderUnavailable {
		e.RetryAfter = upstream.RetryHint(h, c.http.Now())
	}
	return upstream.Annotate(e, h, body, c.http.Now())
}

// streamError builds provider's error for an "error" event that arrived after HTTP 200, or
// an error body in a 200; key is redacted from its message.
func streamError(provider string, ae *apiError, key string) *llm.Error {
	kind, _ := kindForType(ae)
	msg := ae.Message
	if msg == "" {
		msg = "error event: " + cmp.Or(ae.Type, "no details")
	}
	return &llm.Error{Kind: kind, Provider: provider, UpstreamCode: ae.Type, Message: upstream.Redact(msg, key)}
}
