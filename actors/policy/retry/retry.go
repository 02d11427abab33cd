// Package retry decides, as pure code, whether a failed backend attempt is tried again, on
// which key and after how long (SPEC §10), and keeps the per-provider retry budget that stops
// a failing backend from seeing a retry storm.
//
// Decide is a function of the attempt's outcome and the call's history; Budget is a small
// state machine with the clock passed in. Neither has goroutines or timers. The owner (the
// provider actor holding the call's lane) asks Decide after every failed attempt, asks the
// Budget before making the retry it allows, and tells the Budget of every first attempt.
//
// # The rule
//
//   - Nothing is retried once the first byte reached the client, nor a class that retrying
//     cannot fix (a request error, an exhausted quota, a run timeout) nor a client that left.
//   - A rate limit or a refused key moves at once to another key that is neither cooling nor
//     tried by this call; without one, a rate limit waits for the next key to be free.
//   - A provider-down answer or a connection error is tried again after a backoff: full
//     jitter over 250ms × 2^n for the n-th backoff, and never less than the backend's hint.
//   - At most Retries extra attempts per call, key moves included: a call makes at most
//     1+Retries attempts on its model, however many keys there are.
//   - A retry whose wait would pass MaxWait is not made: the call goes on to its fallbacks or
//     is answered, with the backend's hint as its Retry-After.
package retry

import (
	"context"
	"errors"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// Defaults of SPEC §10.
const (
	DefaultRetries = 2
	DefaultMaxWait = 2 * time.Second
	// BaseBackoff is the first backoff's ceiling; the n-th is BaseBackoff × 2^n.
	BaseBackoff = 250 * time.Millisecond
)

// Class is what an attempt's outcome means for what to do next.
type Class int

const (
	Success     Class = iota
	RateLimited       // the backend throttled this key: another key, or wait for one
	BadKey            // the key was refused as invalid: set it aside, another key
	Down              // the provider failed or is down for everyone: back off and retry
	Fatal             // retrying cannot help: a request error, a quota, a run timeout
	ClientGone        // the client cancelled: nothing to retry, nothing to blame
)

func (c Class) String() string {
	return [...]string{"success", "rate_limited", "bad_key", "down", "fatal", "client_gone"}[c]
}

// ClassOf classifies an attempt's error (nil is Success). A transport error is an
// *llm.Error of KindUpstream and so is Down, like a 5xx; the caller's own cancellation comes
// back from the adapters as its context error and is ClientGone.
func ClassOf(err error) Class {
	if err == nil {
		return Success
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return ClientGone
	}
	switch llm.KindOf(err) {
	case llm.KindUpstreamRateLimited:
		return RateLimited
	case llm.KindUpstreamAuth:
		return BadKey
	case llm.KindUpstream, llm.KindUpstreamTruncated, llm.KindProviderUnavailable:
		return Down // a cut-off answer too: the backend failed, and a new attempt may be whole
	}
	return Fatal
}

// Policy is a provider's retry settings. Zero fields take their defaults; Retries < 0 means
// no retries (configured as retries: 0).
type Policy struct {
	Retries int           // extra attempts per call; 0 → DefaultRetries, negative → none
	MaxWait time.Duration // longest wait before a retry; 0 → DefaultMaxWait
}

func (p Policy) retries() int {
	switch {
	case p.Retries < 0:
		return 0
	case p.Retries == 0:
		return DefaultRetries
	}
	return p.Retries
}

func (p Policy) maxWait() time.Duration {
	if p.MaxWait <= 0 {
		return DefaultMaxWait
	}
	return p.MaxWait
}

// Attempt is what the owner knows after a failed attempt.
type Attempt struct {
	Class Class
	// Hint is the wait the backend advised (llm.Error.RetryAfter); zero when none.
	Hint time.Duration
	// FirstByte reports that some of the answer already reached the client.
	FirstByte bool
	// Made is the attempts made so far by this call on this model, the failed one included.
	Made int
	// Backoffs is how many of those retries were backoffs (not key moves).
	Backoffs int
	// KeyFree reports that a key neither cooling nor tried by this call is ready now.
	KeyFree bool
	// KeyWait, when no key is free, is how long until one is (the keys' NextFree − now);
	// negative when every key is invalid.
	KeyWait time.Duration
}

// Decision is what to do after a failed attempt.
type Decision struct {
	Retry bool
	// OtherKey: retry on another key (the one Pick gives) rather than the same.
	OtherKey bool
	// Backoff marks a retry that counts as a backoff (Attempt.Backoffs + 1 next time).
	Backoff bool
	// Wait is how long to wait before the retry, holding the lane.
	Wait time.Duration
	// Why says why there is no retry, for logs: "first byte sent", "retries exhausted", ...
	Why string
}

// Decide applies the rule. jitter is a uniform random number in [0, 1) for the full-jitter
// backoff, passed in so the decision is a pure function.
func (p Policy) Decide(a Attempt, jitter float64) Decision {
	switch {
	case a.Class == Success:
		return Decision{Why: "success"}
	case a.Class == ClientGone:
		return Decision{Why: "client gone"}
	case a.FirstByte:
		return Decision{Why: "first byte sent"}
	case a.Class == Fatal:
		return Decision{Why: "not retryable"}
	case a.Made >= 1+p.retries():
		return Decision{Why: "retries exhausted"}
	}
	switch a.Class {
	case RateLimited, BadKey:
		if a.KeyFree {
			return Decision{Retry: true, OtherKey: true}
		}
		if a.Class == BadKey || a.KeyWait < 0 {
			return Decision{Why: "no other key"}
		}
		// Every key is cooling: the retry waits for the first to be free.
		return p.wait(max(a.KeyWait, a.Hint), Decision{Retry: true, OtherKey: true})
	}
	// Down: back off on any key.
	ceiling := BaseBackoff << min(a.Backoffs, 20)
	backoff := time.Duration(jitter * float64(ceiling))
	return p.wait(max(backoff, a.Hint), Decision{Retry: true, OtherKey: a.KeyFree, Backoff: true})
}

// wait gives d a wait, or refuses it when it would pass MaxWait.
func (p Policy) wait(w time.Duration, d Decision) Decision {
	if w > p.maxWait() {
		return Decision{Wait: w, Why: "wait past max_retry_wait"}
	}
	d.Wait = w
	return d
}
