package fakellm

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// apiError is an error answer before any byte of the answer went out, written in the format
// of the endpoint (errorBody).
type apiError struct {
	status  int
	typ     string // OpenAI error.type, Anthropic error.type, Gemini error.status
	code    string // OpenAI error.code; "" writes null. Not used by the other formats.
	message string
}

// errorBody encodes e as the endpoint's error body.
func errorBody(a api, e apiError) []byte {
	var b []byte
	switch a {
	case apiAnthropic:
		b = append(b, `{"type":"error","error":{"type":`...)
		b = appendString(b, e.typ)
		b = append(b, `,"message":`...)
		b = appendString(b, e.message)
		b = append(b, `},"request_id":"req_fakellm"}`...)
	case apiGemini:
		b = append(b, `{"error":{"code":`...)
		b = strconv.AppendInt(b, int64(e.status), 10)
		b = append(b, `,"message":`...)
		b = appendString(b, e.message)
		b = append(b, `,"status":`...)
		b = appendString(b, e.typ)
		b = append(b, `}}`...)
	default:
		b = append(b, `{"error":{"message":`...)
		b = appendString(b, e.message)
		b = append(b, `,"type":`...)
		b = appendString(b, e.typ)
		b = append(b, `,"param":null,"code":`...)
		if e.code == "" {
			b = append(b, "null"...)
		} else {
			b = appendString(b, e.code)
		}
		b = append(b, `}}`...)
	}
	return b
}

func writeError(w http.ResponseWriter, a api, e apiError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.status)
	w.Write(errorBody(a, e))
}

func invalidRequest(a api, msg string) apiError {
	if a == apiGemini {
		return apiError{http.StatusBadRequest, "INVALID_ARGUMENT", "", msg}
	}
	return apiError{http.StatusBadRequest, "invalid_request_error", "", msg}
}

// rateLimited is a 429 "slow down" in the endpoint's vocabulary.
func rateLimited(a api, msg string) apiError {
	switch a {
	case apiAnthropic:
		return apiError{http.StatusTooManyRequests, "rate_limit_error", "", msg}
	case apiGemini:
		return apiError{http.StatusTooManyRequests, "RESOURCE_EXHAUSTED", "", msg}
	}
	return apiError{http.StatusTooManyRequests, "requests", "rate_limit_exceeded", msg}
}

// writeBusy answers a request beyond the hidden concurrency limit in the server's busy style.
func (s *Server) writeBusy(w http.ResponseWriter, a api) {
	limit := strconv.FormatInt(s.limit.Load(), 10)
	switch *s.busy.Load() {
	case BusyLlamaCpp: // llama.cpp's answer when no slot is free (its /health shape)
		failure{http.StatusServiceUnavailable, "application/json", nil,
			[]byte(`{"status":"no slot available","slots_idle":0,"slots_processing":` + limit + `}`)}.write(w)
		return
	case BusyOllama: // Ollama's full queue: no number
		failure{http.StatusServiceUnavailable, "application/json", nil,
			[]byte(`{"error":"server busy, please try again.  maximum pending requests exceeded"}`)}.write(w)
		return
	case BusyAnthropic: // Anthropic's concurrency refusal: no number
		w.Header().Set("Retry-After", "1")
		writeError(w, apiAnthropic, rateLimited(apiAnthropic, "Number of concurrent connections has exceeded your rate limit. Please try again later."))
		return
	}
	h := w.Header()
	h.Set("Retry-After", "1")
	h.Set("Retry-After-Ms", "1000")
	h.Set("X-Ratelimit-Limit-Requests", limit)
	h.Set("X-Ratelimit-Remaining-Requests", "0")
	h.Set("X-Ratelimit-Reset-Requests", "1s")
	msg := "Rate limit reached: more than " + limit + " concurrent requests. Please try again in 1s."
	writeError(w, a, rateLimited(a, msg))
}

// The busy styles: how a request beyond the hidden limit is refused (docs/capacity-signals.md).
const (
	BusyStated    = "stated"    // 429 in the endpoint's format, "more than N concurrent requests", retry-after 1 s, x-ratelimit-*
	BusyLlamaCpp  = "llamacpp"  // 503 {"status":"no slot available","slots_idle":0,"slots_processing":N}
	BusyOllama    = "ollama"    // 503 "server busy, please try again.  maximum pending requests exceeded"
	BusyAnthropic = "anthropic" // 429 rate_limit_error "Number of concurrent connections has exceeded your rate limit"
)

// BusyStyles lists the valid busy styles ("" is BusyStated).
func BusyStyles() []string { return []string{BusyStated, BusyLlamaCpp, BusyOllama, BusyAnthropic} }

// CheckBusyStyle names an unknown style.
func CheckBusyStyle(style string) error {
	if style == "" || contains(BusyStyles(), style) {
		return nil
	}
	return fmt.Errorf("unknown busy style %q (known: %s)", style, strings.Join(BusyStyles(), ", "))
}

// rateHeaders are the x-ratelimit headers of an admitted request when a limit is set.
func (s *Server) rateHeaders(h http.Header) {
	limit := s.limit.Load()
	left := limit - s.concurrent.Load()
	h.Set("X-Ratelimit-Limit-Requests", strconv.FormatInt(limit, 10))
	h.Set("X-Ratelimit-Remaining-Requests", strconv.FormatInt(max(left, 0), 10))
	h.Set("X-Ratelimit-Reset-Requests", "1s")
}

// failure is a whole scripted error answer.
type failure struct {
	status      int
	contentType string
	header      [][2]string
	body        []byte
}

func (f failure) write(w http.ResponseWriter) error {
	h := w.Header()
	h.Set("Content-Type", f.contentType)
	for _, kv := range f.header {
		h.Set(kv[0], kv[1])
	}
	w.WriteHeader(f.status)
	_, err := w.Write(f.body)
	return err
}

func jsonFailure(a api, e apiError, header ...[2]string) failure {
	return failure{status: e.status, contentType: "application/json", header: header, body: errorBody(a, e)}
}

// The vendor error bodies the quirk modes send as they are, whatever the endpoint.
const (
	geminiNestedBody = `{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details. Please retry in 7s.","status":"RESOURCE_EXHAUSTED","details":[` +
		`{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier","quotaDimensions":{"location":"global","model":"fake-model"},"quotaValue":"10"}]},` +
		`{"@type":"type.googleapis.com/google.rpc.Help","links":[{"description":"Learn more about Gemini API quotas","url":"https://ai.google.dev/gemini-api/docs/rate-limits"}]},` +
		`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"7s"}]}}`
	geminiDailyBody = `{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.","status":"RESOURCE_EXHAUSTED","details":[` +
		`{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier","quotaDimensions":{"location":"global","model":"fake-model"},"quotaValue":"250"}]},` +
		`{"@type":"type.googleapis.com/google.rpc.Help","links":[{"description":"Learn more about Gemini API quotas","url":"https://ai.google.dev/gemini-api/docs/rate-limits"}]}]}}`
	dashScopeBody = `{"request_id":"fakellm-dashscope","code":"Throttling.RateQuota","message":"Requests rate limit exceeded, please try again later."}`
	qianfanBody   = `{"error_code":18,"error_msg":"Open api qps request limit reached"}`
	deepSeekBody  = `{"error":{"message":"Insufficient Balance","type":"unknown_error","param":null,"code":"invalid_request_error"}}`
	garbageBody   = "<html><body><h1>502 Bad Gateway</h1></body></html>\n\x00\xff not json"
)

// quirkFailure returns the scripted error answer of the request's modes, if one applies.
// When several apply, the first in this order wins.
func quirkFailure(c *call) (failure, bool) {
	a, m := c.api, c.modes
	switch {
	case m.Has(ModeRateLimit):
		return jsonFailure(a, rateLimited(a, "Rate limit reached for requests. Please try again in 2s."),
			[2]string{"Retry-After", "2"}, [2]string{"Retry-After-Ms", "2000"},
			[2]string{"X-Ratelimit-Remaining-Requests", "0"}, [2]string{"X-Ratelimit-Reset-Requests", "2s"}), true
	case m.Has(ModeOverloaded):
		return jsonFailure(a, overloaded(a)), true
	case m.Has(ModeQuota):
		if a == apiGemini {
			return failure{http.StatusTooManyRequests, "application/json", nil, []byte(geminiDailyBody)}, true
		}
		return jsonFailure(a, quotaExhausted(a), [2]string{"X-Should-Retry", "false"}), true
	case m.Has(ModeQuota402):
		return failure{http.StatusPaymentRequired, "application/json", nil, []byte(deepSeekBody)}, true
	case m.Has(ModeGeminiNestedError):
		return failure{http.StatusTooManyRequests, "application/json", nil, []byte(geminiNestedBody)}, true
	case m.Has(ModeGeminiDailyQuota):
		return failure{http.StatusTooManyRequests, "application/json", nil, []byte(geminiDailyBody)}, true
	case m.Has(ModeError200DashScope):
		if c.stream { // DashScope's native SSE framing: no space after colons, a status comment
			body := "id:1\nevent:error\n:HTTP_STATUS/429\ndata:" + dashScopeBody + "\n\n"
			return failure{http.StatusOK, "text/event-stream", nil, []byte(body)}, true
		}
		return failure{http.StatusOK, "application/json", nil, []byte(dashScopeBody)}, true
	case m.Has(ModeError200Qianfan): // plain JSON even when a stream was asked for
		return failure{http.StatusOK, "application/json", nil, []byte(qianfanBody)}, true
	case m.Has(ModeGarbage):
		ct := "application/json"
		if c.stream {
			ct = "text/event-stream"
			return failure{http.StatusOK, ct, nil, []byte("data: " + garbageBody + "\n\n")}, true
		}
		return failure{http.StatusOK, ct, nil, []byte(garbageBody)}, true
	case m.Has(ModeErrorMidstream) && !c.stream: // no stream to break: fail the whole answer
		return jsonFailure(a, internalError(a)), true
	}
	return failure{}, false
}

func overloaded(a api) apiError {
	switch a {
	case apiAnthropic:
		return apiError{529, "overloaded_error", "", "Overloaded"}
	case apiGemini:
		return apiError{http.StatusServiceUnavailable, "UNAVAILABLE", "", "The model is overloaded. Please try again later."}
	}
	return apiError{http.StatusServiceUnavailable, "server_error", "overloaded", "The server is overloaded. Please try again later."}
}

func quotaExhausted(a api) apiError {
	if a == apiAnthropic {
		return apiError{http.StatusPaymentRequired, "billing_error", "", "Your credit balance is too low to access the API."}
	}
	return apiError{http.StatusTooManyRequests, "insufficient_quota", "insufficient_quota",
		"You exceeded your current quota, please check your plan and billing details."}
}

func internalError(a api) apiError {
	switch a {
	case apiAnthropic:
		return apiError{http.StatusInternalServerError, "api_error", "", "Internal server error"}
	case apiGemini:
		return apiError{http.StatusInternalServerError, "INTERNAL", "", "An internal error has occurred."}
	}
	return apiError{http.StatusInternalServerError, "server_error", "internal_error", "The server had an error while processing your request."}
}
