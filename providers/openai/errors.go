package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/upstream"
	"github.com/tollgate/tollgate/providers/wirejson"
)

// errorBody is the union of the error shapes OpenAI-compatible backends send, as a whole body
// or as one stream frame:
//
//	{"error": {"message", "type", "code", "param"}}   OpenAI, Ark, Qianfan v2, NIM, Ollama
//	{"error": "text"}                                 Ollama and some proxies
//	{"code": "Throttling.RateQuota", "message"}       DashScope
//	{"error_code": 18, "error_msg"}                   Qianfan v1
type errorBody struct {
	Error     json.RawMessage `json:"error"`
	Code      json.RawMessage `json:"code"`
	Message   string          `json:"message"`
	ErrorCode json.RawMessage `json:"error_code"`
	ErrorMsg  string          `json:"error_msg"`
	Choices   json.RawMessage `json:"choices"`
}

type errorObject struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
	Param   json.RawMessage `json:"param"`
}

// backendError is what a body says about a failure: its code, type and message.
type backendError struct {
	code, typ, msg string
	param          string
	qianfan        int // Qianfan v1 error_code, 0 when absent
}

// parseError reports whether the JSON object b is an error and what it says. A frame with
// choices is a chunk, whatever else it carries.
func parseError(b []byte) (backendError, bool) {
	var eb errorBody
	if wirejson.Unmarshal(b, &eb) != nil {
		return backendError{}, false
	}
	if present(eb.Error) {
		var eo errorObject
		if wirejson.Unmarshal(eb.Error, &eo) == nil {
			return backendError{code: rawString(eo.Code), typ: eo.Type, msg: eo.Message, param: rawString(eo.Param)}, true
		}
		var s string
		if wirejson.Unmarshal(eb.Error, &s) == nil {
			return backendError{msg: s}, true
		}
		return backendError{msg: string(eb.Error)}, true
	}
	if present(eb.ErrorCode) {
		n, _ := strconv.Atoi(rawString(eb.ErrorCode))
		if n != 0 {
			return backendError{code: strconv.Itoa(n), msg: eb.ErrorMsg, qianfan: n}, true
		}
	}
	if present(eb.Code) && !present(eb.Choices) {
		code := rawString(eb.Code)
		if code != "" && code != "200" && code != "0" {
			return backendError{code: code, msg: eb.Message}, true
		}
	}
	return backendError{}, false
}

func present(r json.RawMessage) bool { return len(r) > 0 && !bytes.Equal(r, []byte("null")) }

// rawString renders a JSON string or number as text ("" for null or anything else).
func rawString(r json.RawMessage) string {
	if !present(r) {
		return ""
	}
	if s, ok := wirejson.String(r); ok {
		return s
	}
	if c := r[0]; c == '-' || c >= '0' && c <= '9' {
		return string(r) // a number (r is a decoded value), as written
	}
	return ""
}

// statusError turns a non-2xx answer, its status, headers and the start of its body, into an
// *llm.Error (upstream.Wire.StatusError). Every key is redacted from it, the call's among them.
func (c *Client) statusError(status int, h http.Header, body []byte, _ string) *llm.Error {
	be, ok := parseError(bytes.TrimSpace(body))
	if !ok && len(bytes.TrimSpace(body)) > 0 {
		be.msg = "backend said: " + c.snippet(body)
	}
	kind, known := kindForCode(be)
	switch {
	case known:
	case status == http.StatusServiceUnavailable && strings.Contains(strings.ToLower(be.msg), "server busy"):
		// Ollama's full queue (OLLAMA_MAX_QUEUE): the server is up and refusing for capacity,
		// which is a rate limit, not a provider that is down.
		kind = llm.KindUpstreamRateLimited
	default:
		kind = upstream.KindForStatus(status)
	}
	return upstream.Annotate(c.newError(kind, status, h, be), h, body, c.clock())
}

// bodyError turns an error reported inside a 200 (a whole body or a stream frame).
func (c *Client) bodyError(h http.Header, be backendError) *llm.Error {
	kind, known := kindForCode(be)
	switch {
	case known:
	case strings.EqualFold(be.typ, "invalid_request_error"):
		// Too generic to override an HTTP status (OpenAI sends it with 401s too), but
		// inside a 200 it is the best evidence there is.
		kind = llm.KindUpstreamInvalid
	default:
		kind = llm.KindUpstream
	}
	return upstream.Annotate(c.newError(kind, http.StatusOK, h, be), h, []byte(be.msg), c.clock())
}

// clock is the adapter's time: time.Now, or the tests' fixed clock.
func (c *Client) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

func (c *Client) newError(kind llm.Kind, status int, h http.Header, be backendError) *llm.Error {
	msg := be.msg
	if msg == "" {
		msg = fmt.Sprintf("backend answered HTTP %d", status)
		if be.code != "" {
			msg += " with code " + be.code
		}
	}
	e := &llm.Error{
		Kind: kind, Provider: c.name, Message: upstream.Redact(msg, c.secrets...),
		Param: be.param, UpstreamStatus: status, UpstreamCode: be.code,
	}
	if e.UpstreamCode == "" {
		e.UpstreamCode = be.typ
	}
	if kind == llm.KindUpstreamAuth {
		e.KeyInvalid = upstream.KeyInvalid(be.code, msg) || upstream.KeyInvalid(be.typ, "")
	}
	if kind == llm.KindUpstreamRateLimited || kind == llm.KindProviderUnavailable {
		e.RetryAfter = upstream.RetryHint(h, c.clock())
	}
	return e
}

// snippet is a short excerpt of a body that is not a recognised error: the keys redacted
// first, then cut past 300 bytes, so a key straddling the cut is never shown in part.
func (c *Client) snippet(body []byte) string {
	return upstream.Cut(upstream.Redact(string(bytes.TrimSpace(body)), c.secrets...), 300)
}

// codeKinds maps backend error codes and types (lower-cased) to kinds. Codes win over the
// HTTP status: OpenAI sends insufficient_quota with 429, which waiting will not fix.
var codeKinds = map[string]llm.Kind{
	// quota and billing: waiting does not help
	"insufficient_quota":         llm.KindUpstreamQuota,
	"insufficient_balance":       llm.KindUpstreamQuota,
	"throttling.allocationquota": llm.KindUpstreamQuota,
	"prepaidbilloverdue":         llm.KindUpstreamQuota,
	"postpaidbilloverdue":        llm.KindUpstreamQuota,
	"arrearage":                  llm.KindUpstreamQuota,
	"commoditynotpurchased":      llm.KindUpstreamQuota,
	"accountoverdueerror":        llm.KindUpstreamQuota,
	"billing_error":              llm.KindUpstreamQuota,
	// throttling: waiting helps
	"rate_limit_exceeded":  llm.KindUpstreamRateLimited,
	"rate_limit_error":     llm.KindUpstreamRateLimited,
	"throttling":           llm.KindUpstreamRateLimited,
	"throttling.ratequota": llm.KindUpstreamRateLimited,
	"limitrequests":        llm.KindUpstreamRateLimited,
	"limit_requests":       llm.KindUpstreamRateLimited,
	"toomanyrequests":      llm.KindUpstreamRateLimited,
	// auth
	"invalid_api_key":      llm.KindUpstreamAuth,
	"invalidapikey":        llm.KindUpstreamAuth,
	"authenticationerror":  llm.KindUpstreamAuth,
	"authentication_error": llm.KindUpstreamAuth,
	"permission_error":     llm.KindUpstreamAuth,
	"accessdenied":         llm.KindUpstreamAuth,
	// the request itself
	"context_length_exceeded": llm.KindUpstreamInvalid,
	"invalidparameter":        llm.KindUpstreamInvalid,
	"missingparameter":        llm.KindUpstreamInvalid,
	"datainspectionfailed":    llm.KindUpstreamInvalid,
	"modelnotfound":           llm.KindUpstreamInvalid,
	"model_not_found":         llm.KindUpstreamInvalid,
	"not_found_error":         llm.KindUpstreamInvalid,
	// the backend
	"modelunavailable":      llm.KindProviderUnavailable,
	"overloaded_error":      llm.KindProviderUnavailable,
	"internalerror":         llm.KindUpstream,
	"systemerror":           llm.KindUpstream,
	"requesttimeout":        llm.KindUpstream,
	"internal_server_error": llm.KindUpstream,
}

// qianfanKinds classifies Qianfan v1 error_code values (PROTOCOLS §6). The SDK retries exactly
// 2, 18, 336100, 336501 and 336502; 4 is a cluster-wide limit, retried slowly.
var qianfanKinds = map[int]llm.Kind{
	1: llm.KindUpstream, 2: llm.KindProviderUnavailable, 3: llm.KindUpstreamInvalid,
	4: llm.KindUpstreamRateLimited, 6: llm.KindUpstreamAuth, 13: llm.KindUpstreamAuth,
	14: llm.KindUpstreamAuth, 15: llm.KindUpstreamAuth, 17: llm.KindUpstreamQuota,
	18: llm.KindUpstreamRateLimited, 19: llm.KindUpstreamQuota, 100: llm.KindUpstreamInvalid,
	110: llm.KindUpstreamAuth, 111: llm.KindUpstreamAuth, 336000: llm.KindUpstream,
	336004: llm.KindUpstreamAuth, 336100: llm.KindProviderUnavailable,
	336501: llm.KindUpstreamRateLimited, 336502: llm.KindUpstreamRateLimited,
}

// kindForCode classifies what a body says; known is false when nothing in it is recognised
// and the HTTP status must decide.
func kindForCode(be backendError) (kind llm.Kind, known bool) {
	if be.qianfan != 0 {
		if k, ok := qianfanKinds[be.qianfan]; ok {
			return k, true
		}
		return llm.KindUpstreamInvalid, true // the remaining codes are all request or setup errors
	}
	for _, s := range []string{be.code, be.typ} {
		s = strings.ToLower(s)
		if k, ok := codeKinds[s]; ok {
			return k, true
		}
		switch { // families of codes that share a prefix
		case strings.HasPrefix(s, "ratelimitexceeded"), strings.HasPrefix(s, "throttling."):
			return llm.KindUpstreamRateLimited, true
		case strings.HasPrefix(s, "accessdenied"):
			return llm.KindUpstreamAuth, true
		case strings.HasPrefix(s, "internalerror"):
			return llm.KindUpstream, true
		case strings.HasPrefix(s, "invalidendpointormodel"):
			return llm.KindUpstreamInvalid, true
		}
	}
	return 0, false
}
