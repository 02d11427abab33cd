package llm

import (
	"context"
	"time"
)

// KeyedBackend is the optional capability of a backend that holds several API keys and lets
// its caller choose which one a call uses, so the gateway can keep each key's health (SPEC
// §10: cooldowns, keys set aside). Open keeps rotating over the keys on its own.
type KeyedBackend interface {
	Backend
	// Keys is how many keys a call to model rotates over; at least 1 (a backend with no key
	// sends none, which counts as one).
	Keys(model string) int
	// OpenWithKey is Open with key i (0 ≤ i < Keys(model)) of model's keys. Its errors carry
	// i in Error.Key.
	OpenWithKey(ctx context.Context, req *Request, key int) (Stream, error)
}

// Quota is what a backend said about its rate-limit buckets in an answer's headers
// (x-ratelimit-*, anthropic-ratelimit-*). A count of -1 means the backend did not say; a
// zero reset means it gave none.
type Quota struct {
	RequestsRemaining int
	TokensRemaining   int
	RequestsReset     time.Duration // until the requests bucket is full again
	TokensReset       time.Duration
}

// NoQuota is a Quota with nothing known.
var NoQuota = Quota{RequestsRemaining: -1, TokensRemaining: -1}

// Known reports whether the backend said anything about its buckets.
func (q Quota) Known() bool { return q.RequestsRemaining >= 0 || q.TokensRemaining >= 0 }

// QuotaReporter is the optional capability of a Stream whose answer's headers described the
// backend's buckets: the remaining-requests count that holds learned lanes (SPEC §11).
type QuotaReporter interface {
	Quota() Quota
}
