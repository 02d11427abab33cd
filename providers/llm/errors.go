package llm

import (
	"errors"
	"fmt"
	"time"
)

// Kind classifies an error by what the client should be told. The HTTP layer maps each kind
// to one status and SPEC §4 code, in one place.
type Kind int

const (
	// KindUpstream: the backend failed or answered garbage (502 upstream_error). Also the
	// kind of any error that is not an *Error.
	KindUpstream Kind = iota
	// KindUpstreamRateLimited: the backend throttled us; waiting helps (429, Retry-After).
	KindUpstreamRateLimited
	// KindUpstreamQuota: the backend's quota or balance is exhausted; waiting does not help.
	KindUpstreamQuota
	// KindUpstreamInvalid: the backend refused the request as invalid (400); its message is relayed.
	KindUpstreamInvalid
	// KindUpstreamAuth: the backend refused our key (502 upstream_auth_failed).
	KindUpstreamAuth
	// KindProviderUnavailable: the backend is down or overloaded for everyone (503).
	KindProviderUnavailable
	// KindRunTimeout: the call ran past its provider's run_timeout (504).
	KindRunTimeout
	// KindUpstreamTruncated: the backend's answer ended before its end marker (OpenAI's
	// [DONE] or a finish reason, Anthropic's message_stop, Gemini's finishReason, a CLI's
	// final event): a cut-off answer, never to be passed off as a complete one (502).
	KindUpstreamTruncated

	// Gateway decisions, made before any backend was called.

	KindInvalidRequest  // 400 invalid_request
	KindModelNotFound   // 404 model_not_found
	KindQueueFull       // 429 provider_queue_full
	KindQueueTimeout    // 429 provider_queue_timeout
	KindOverloaded      // 429 gateway_overloaded
	KindDraining        // 503 gateway_draining
	KindBatchCapacity   // 429 batch_capacity_unavailable
	KindBatchImpossible // 400 batch_exceeds_provider_capacity
	KindBatchTooLarge   // 400 batch_too_large

	// Decisions about the client a call is for (SPEC §18).

	KindClientConcurrency // 429 client_concurrency_limited: the key has max_queued calls waiting
	KindClientRateLimited // 429 client_rate_limited: the key's own rpm/tpm bucket is empty
	KindInvalidAPIKey     // 401 invalid_api_key: the key was revoked while the call waited
)

var kindNames = [...]string{
	KindUpstream:            "upstream_error",
	KindUpstreamRateLimited: "upstream_rate_limited",
	KindUpstreamQuota:       "upstream_quota_exhausted",
	KindUpstreamInvalid:     "upstream_invalid_request",
	KindUpstreamAuth:        "upstream_auth_failed",
	KindProviderUnavailable: "provider_unavailable",
	KindRunTimeout:          "provider_run_timeout",
	KindUpstreamTruncated:   "upstream_truncated",
	KindInvalidRequest:      "invalid_request",
	KindModelNotFound:       "model_not_found",
	KindQueueFull:           "provider_queue_full",
	KindQueueTimeout:        "provider_queue_timeout",
	KindOverloaded:          "gateway_overloaded",
	KindDraining:            "gateway_draining",
	KindBatchCapacity:       "batch_capacity_unavailable",
	KindBatchImpossible:     "batch_exceeds_provider_capacity",
	KindBatchTooLarge:       "batch_too_large",
	KindClientConcurrency:   "client_concurrency_limited",
	KindClientRateLimited:   "client_rate_limited",
	KindInvalidAPIKey:       "invalid_api_key",
}

// String returns the SPEC §4 error code of the kind.
func (k Kind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Error is an error with a Kind, the provider it concerns and, for errors that waiting can
// fix, how long to wait. Adapters return it for everything a backend reports; the gateway
// returns it for its own rejections.
type Error struct {
	Kind    Kind
	Message string // for the client; never contains a key
	// Detail is the whole text of the failure for the log, where Message leaves out what only
	// the operator may read (a backend's URL and addresses); "" when Message says it all.
	// Never contains a key.
	Detail   string
	Provider string // provider name, empty for gateway-wide errors
	Param    string // the offending request field, when known
	// RetryAfter is how long the client should wait before trying again; zero when the
	// source gave no hint. Only meaningful for kinds where waiting helps.
	RetryAfter time.Duration
	// UpstreamStatus and UpstreamCode are what the backend said (HTTP status, its error code),
	// kept for logs and for the adapters' tests; zero when the error is the gateway's own.
	UpstreamStatus int
	UpstreamCode   string
	// KeyInvalid, for KindUpstreamAuth, says the backend's answer named the key itself as
	// invalid, revoked or disabled, not only refused this model or action: a 403 that says
	// so sets the key aside for every model, not only for the model asked (SPEC §10;
	// docs/capacity-signals.md maps each kind's bodies).
	KeyInvalid bool
	// Key is the index of the key the failed call used, among KeyedBackend.Keys of its model;
	// meaningful only for errors a KeyedBackend returned (0 otherwise).
	Key int
	// StatedLimit is the concurrency the backend said it takes while refusing (its limit, or
	// its slots in use when it names no limit; SPEC §11); 0 when it stated none.
	StatedLimit int
	// Quota is what the refusal's headers said of the backend's buckets; nil when nothing.
	Quota *Quota
	// Err is the underlying cause, if any (a transport error, a decode error).
	Err error
	// Limits, for batch_exceeds_provider_capacity, are the scopes a batch asks more of than
	// they have (SPEC §5 provider_limits); only those that overflow.
	Limits []ScopeLimit
}

// ScopeLimit is one scope a batch overflows: a provider's lanes (Model empty), one model's
// model lanes, or the gateway's max_running (Provider and Model empty).
type ScopeLimit struct {
	Provider  string
	Model     string
	Requested int
	Limit     int
}

func (e *Error) Error() string {
	msg := e.Message
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	}
	if e.Provider != "" {
		return fmt.Sprintf("%s: %s: %s", e.Kind, e.Provider, msg)
	}
	return fmt.Sprintf("%s: %s", e.Kind, msg)
}

func (e *Error) Unwrap() error { return e.Err }

// Retryable reports whether waiting and trying again can succeed.
func (k Kind) Retryable() bool {
	switch k {
	case KindUpstreamRateLimited, KindQueueFull, KindQueueTimeout, KindOverloaded, KindBatchCapacity,
		KindClientConcurrency, KindClientRateLimited:
		return true
	}
	return false
}

// KindOf returns the kind of err: its *Error's kind, or KindUpstream for any other error.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindUpstream
}
