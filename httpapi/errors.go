package httpapi

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// apiError is an error as the client sees it: status, SPEC §4 code and OpenAI error type.
type apiError struct {
	status     int
	code       string
	typ        string
	message    string
	detail     string // for the log only: what message leaves out (llm.Error.Detail)
	param      string
	provider   string
	retryAfter time.Duration    // > 0 only for answers where waiting helps
	noRetry    bool             // send x-should-retry: false (a 5xx that retrying cannot fix)
	closeConn  bool             // close the connection after the answer (what is left of the request cannot be trusted)
	limits     []llm.ScopeLimit // batch_exceeds_provider_capacity: the scopes that overflow
}

// statusOf is the one table from error kind to HTTP status and OpenAI error type.
var statusOf = map[llm.Kind]struct {
	status  int
	typ     string
	noRetry bool
}{
	llm.KindUpstream:            {http.StatusBadGateway, "api_error", false},
	llm.KindUpstreamRateLimited: {http.StatusTooManyRequests, "rate_limit_error", false},
	llm.KindUpstreamQuota:       {http.StatusPaymentRequired, "insufficient_quota", true},
	llm.KindUpstreamInvalid:     {http.StatusBadRequest, "invalid_request_error", false},
	llm.KindUpstreamAuth:        {http.StatusBadGateway, "api_error", true},
	llm.KindProviderUnavailable: {http.StatusServiceUnavailable, "api_error", false},
	llm.KindRunTimeout:          {http.StatusGatewayTimeout, "timeout_error", true},
	// A cut-off answer is the backend's failure, like upstream_error, and a new attempt
	// may well be whole: a 5xx the SDKs retry, not a 4xx that blames the client.
	llm.KindUpstreamTruncated: {http.StatusBadGateway, "api_error", false},
	llm.KindInvalidRequest:    {http.StatusBadRequest, "invalid_request_error", false},
	llm.KindModelNotFound:     {http.StatusNotFound, "invalid_request_error", false},
	llm.KindQueueFull:         {http.StatusTooManyRequests, "rate_limit_error", false},
	llm.KindQueueTimeout:      {http.StatusTooManyRequests, "rate_limit_error", false},
	llm.KindOverloaded:        {http.StatusTooManyRequests, "rate_limit_error", false},
	llm.KindDraining:          {http.StatusServiceUnavailable, "api_error", true},
	llm.KindBatchCapacity:     {http.StatusTooManyRequests, "rate_limit_error", false},
	llm.KindBatchImpossible:   {http.StatusBadRequest, "invalid_request_error", false},
	llm.KindBatchTooLarge:     {http.StatusBadRequest, "invalid_request_error", false},
	llm.KindClientConcurrency: {http.StatusTooManyRequests, "rate_limit_error", false},
	llm.KindClientRateLimited: {http.StatusTooManyRequests, "rate_limit_error", false},
	// A 4xx the SDKs do not retry; x-should-retry: false says so to any that would.
	llm.KindInvalidAPIKey: {http.StatusUnauthorized, "authentication_error", true},
}

// Limits on the wait a busy answer advises: every SDK honours 1–60 s (PROTOCOLS.md §1).
const (
	minRetryAfter = time.Second
	maxRetryAfter = 60 * time.Second
)

// toAPIError maps any error to its client answer. defaultWait is the gateway's retry_after,
// used for busy answers whose source gave no hint.
func toAPIError(err error, defaultWait time.Duration) apiError {
	var e *llm.Error
	if !errors.As(err, &e) {
		e = &llm.Error{Kind: llm.KindUpstream, Message: err.Error()}
	}
	s := statusOf[e.Kind]
	if s.status == 0 {
		s = statusOf[llm.KindUpstream]
	}
	a := apiError{status: s.status, code: e.Kind.String(), typ: s.typ, message: e.Message, detail: e.Detail,
		param: e.Param, provider: e.Provider, noRetry: s.noRetry, limits: e.Limits}
	if a.message == "" {
		a.message = e.Error()
	}
	if e.Kind.Retryable() || e.Kind == llm.KindProviderUnavailable {
		a.retryAfter = clampWait(e.RetryAfter, defaultWait)
	}
	return a
}

func clampWait(d, def time.Duration) time.Duration {
	if d <= 0 {
		d = def
	}
	return min(max(d, minRetryAfter), maxRetryAfter)
}

func invalid(param, message string) apiError {
	return apiError{status: http.StatusBadRequest, code: "invalid_request", typ: "invalid_request_error",
		message: message, param: param}
}

// errorBody is OpenAI's error shape with Tollgate's extra fields (SPEC §4).
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Message      string  `json:"message"`
	Type         string  `json:"type"`
	Code         string  `json:"code"`
	Param        *string `json:"param"`
	Provider     *string `json:"provider,omitempty"`
	RetryAfterMs *int64  `json:"retry_after_ms,omitempty"`
	// ProviderLimits is batch_exceeds_provider_capacity's list of the scopes that overflow.
	ProviderLimits []scopeLimit `json:"provider_limits,omitempty"`
}

// scopeLimit is one provider_limits entry (SPEC §5): a provider's lanes (model null), one
// model's model lanes, or the gateway's max_running (both null).
type scopeLimit struct {
	Provider  *string `json:"provider"`
	Model     *string `json:"model"`
	Requested int     `json:"requested"`
	Limit     int     `json:"limit"`
}

func (a apiError) body() errorBody {
	d := errorDetail{Message: a.message, Type: a.typ, Code: a.code}
	if a.param != "" {
		d.Param = &a.param
	}
	if a.provider != "" {
		d.Provider = &a.provider
	}
	if a.retryAfter > 0 {
		ms := a.retryAfter.Milliseconds()
		d.RetryAfterMs = &ms
	}
	for _, l := range a.limits {
		sl := scopeLimit{Requested: l.Requested, Limit: l.Limit}
		if l.Provider != "" {
			sl.Provider = &l.Provider
		}
		if l.Model != "" {
			sl.Model = &l.Model
		}
		d.ProviderLimits = append(d.ProviderLimits, sl)
	}
	return errorBody{Error: d}
}

// write sends the error as a whole response in OpenAI's shape.
func (a apiError) write(w http.ResponseWriter) {
	a.writeBody(w, a.body())
}

// failOpenAI writes an error answer in OpenAI's shape: chat's and Responses'.
func failOpenAI(w http.ResponseWriter, a apiError) { a.write(w) }

// writeBody sends the error as a whole response: its status, the retry headers of SPEC §4
// and body, the error in the shape of the client's API.
func (a apiError) writeBody(w http.ResponseWriter, body any) {
	noteCode(w, a.code)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if a.retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int(math.Ceil(a.retryAfter.Seconds()))))
		h.Set("retry-after-ms", strconv.FormatInt(a.retryAfter.Milliseconds(), 10))
	}
	if a.noRetry {
		h.Set("x-should-retry", "false")
	}
	if a.closeConn {
		h.Set("Connection", "close") // the server closes it once the answer is out
	}
	w.WriteHeader(a.status)
	_ = json.NewEncoder(w).Encode(body)
}

// event returns the error as the data of an in-stream SSE error event.
func (a apiError) event() []byte {
	b, _ := json.Marshal(a.body())
	return b
}
