package gemini

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/upstream"
)

// apiError is Google's error object: {"code","message","status","details":[...]}. Details
// are typed by "@type"; only the fields the gateway acts on are read.
type apiError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Status  string `json:"status"`
	Details []struct {
		Type       string `json:"@type"`
		Reason     string `json:"reason"`     // google.rpc.ErrorInfo
		RetryDelay string `json:"retryDelay"` // google.rpc.RetryInfo
		Violations []struct {
			QuotaID string `json:"quotaId"`
		} `json:"violations"` // google.rpc.QuotaFailure
	} `json:"details"`
}

// parseErrorBody reads {"error":{...}}, or the one-element array a non-SSE stream uses.
func parseErrorBody(b []byte) *apiError {
	b = bytes.TrimSpace(b)
	var wrapper struct {
		Error *apiError `json:"error"`
	}
	if len(b) > 0 && b[0] == '[' {
		var list []json.RawMessage
		if json.Unmarshal(b, &list) != nil || len(list) == 0 {
			return nil
		}
		b = list[0]
	}
	if json.Unmarshal(b, &wrapper) != nil || wrapper.Error == nil {
		return nil
	}
	return wrapper.Error
}

// retryInMessage finds "Please retry in 10.68s" (or "…in 350ms") in a quota message.
var retryInMessage = regexp.MustCompile(`(?i)retry in ([0-9]+(?:\.[0-9]+)?(?:ms|s))`)

// classify decides the kind of a Google error and, for rate limits, how long to wait.
// status is the HTTP status (0 inside a stream); h may be nil.
func classify(ae *apiError, status int, h http.Header, now time.Time) (llm.Kind, time.Duration) {
	for _, d := range ae.Details {
		// A bad key is a 400 INVALID_ARGUMENT whose ErrorInfo says so.
		if strings.HasPrefix(d.Reason, "API_KEY_") {
			return llm.KindUpstreamAuth, 0
		}
	}
	switch ae.Status {
	case "RESOURCE_EXHAUSTED":
		return rateLimit(ae, h, now)
	case "INVALID_ARGUMENT", "FAILED_PRECONDITION", "NOT_FOUND", "OUT_OF_RANGE":
		return llm.KindUpstreamInvalid, 0
	case "PERMISSION_DENIED", "UNAUTHENTICATED":
		return llm.KindUpstreamAuth, 0
	case "UNAVAILABLE":
		return llm.KindProviderUnavailable, upstream.RetryHint(h, now)
	case "INTERNAL", "DEADLINE_EXCEEDED", "CANCELLED", "UNKNOWN":
		return llm.KindUpstream, 0
	}
	if status == 0 {
		status = ae.Code
	}
	kind := upstream.KindForStatus(status)
	if kind == llm.KindUpstreamRateLimited {
		return rateLimit(ae, h, now)
	}
	return kind, 0
}

// rateLimit tells a daily quota (waiting minutes does not help) from a per-minute one, and
// finds the advised wait: RetryInfo first, then the message, then the headers.
func rateLimit(ae *apiError, h http.Header, now time.Time) (llm.Kind, time.Duration) {
	var wait time.Duration
	for _, d := range ae.Details {
		for _, v := range d.Violations {
			if strings.Contains(v.QuotaID, "PerDay") {
				return llm.KindUpstreamQuota, 0
			}
		}
		if d.RetryDelay != "" {
			if w, ok := upstream.ParseDuration(d.RetryDelay); ok {
				wait = w
			}
		}
	}
	if wait == 0 {
		if m := retryInMessage.FindStringSubmatch(ae.Message); m != nil {
			wait, _ = upstream.ParseDuration(m[1])
		}
	}
	if wait == 0 && h != nil {
		wait = upstream.RetryHint(h, now)
	}
	return llm.KindUpstreamRateLimited, wait
}

// apiErrorToLLM builds the *llm.Error for ae; key is redacted from the message.
func apiErrorToLLM(provider string, ae *apiError, status int, h http.Header, now time.Time, key string) *llm.Error {
	kind, wait := classify(ae, status, h, now)
	msg := ae.Message
	switch {
	case msg != "":
	case ae.Status != "":
		msg = ae.Status
	default:
		msg = fmt.Sprintf("error %d without a message", max(ae.Code, status))
	}
	return &llm.Error{Kind: kind, Provider: provider, Message: upstream.Redact(msg, key), RetryAfter: wait,
		UpstreamStatus: status, UpstreamCode: ae.Status, KeyInvalid: kind == llm.KindUpstreamAuth && keyRefused(ae)}
}

// keyRefused reports whether a Google refusal names the key itself (its ErrorInfo reason
// API_KEY_INVALID, API_KEY_SERVICE_BLOCKED, ..., the API not enabled for the key's project,
// the project suspended, or the status UNAUTHENTICATED), not a permission on what was asked.
func keyRefused(ae *apiError) bool {
	for _, d := range ae.Details {
		if strings.HasPrefix(d.Reason, "API_KEY_") || d.Reason == "SERVICE_DISABLED" || d.Reason == "CONSUMER_SUSPENDED" {
			return true
		}
	}
	return upstream.KeyInvalid(ae.Status, ae.Message)
}

// statusError builds the error for a non-2xx answer.
func (c *Client) statusError(status int, h http.Header, body []byte, key string) *llm.Error {
	now := c.http.Now()
	if ae := parseErrorBody(body); ae != nil {
		return upstream.Annotate(apiErrorToLLM(c.name, ae, status, h, now, key), h, body, now)
	}
	return upstream.Annotate(upstream.StatusError(c.name, status, h, "",
		fmt.Sprintf("HTTP %d: %s", status, upstream.Snippet(body, key)), now), h, body, now)
}
