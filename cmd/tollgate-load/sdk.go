package main

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

// sdkRetries is how often the official OpenAI and Anthropic SDKs retry a call on their own by
// default.
const sdkRetries = 2

// sendLikeSDK sends c as an official SDK client does (openai-python's _base_client, openai-go):
// a 408, 409, 429 or 5xx answer is retried up to sdkRetries times unless it says
// x-should-retry: false, after the wait it advised when that is at most 60 s, else after
// 0.5 s × 2^n (at most 8 s) less up to a quarter of jitter. Each attempt carries a tag of its
// own (c.tag + "a" + n), so a backend tells the gateway's calls from the gateway's own
// retries of one call. Past until it makes no more retries (the load is over; the call in
// flight still gets its answer). It returns the last outcome and the attempts made.
func sendLikeSDK(ctx context.Context, hc *http.Client, base string, c call, rng *rand.Rand, until time.Time) (outcome, int) {
	tag := c.tag
	for n := 0; ; n++ {
		c.tag = tag + "a" + strconv.Itoa(n)
		o := send(ctx, hc, base, c)
		if n == sdkRetries || !sdkRetryable(o) || ctx.Err() != nil || !time.Now().Before(until) {
			return o, n + 1
		}
		wait := o.retryAfter
		if wait <= 0 || wait > time.Minute {
			wait = min(time.Duration(float64(500*time.Millisecond)*float64(int(1)<<n)), 8*time.Second)
			wait -= time.Duration(rng.Float64() * 0.25 * float64(wait))
		}
		if !time.Now().Add(wait).Before(until) {
			return o, n + 1 // the load ends before the retry would be made
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return o, n + 1
		}
	}
}

// sdkRetryable is the SDKs' rule: the answer's x-should-retry first, else its status.
func sdkRetryable(o outcome) bool {
	switch o.shouldRetry {
	case "true":
		return true
	case "false":
		return false
	}
	switch s := o.status; {
	case s == 0:
		return !o.cancelled // a connection error
	case s == http.StatusRequestTimeout, s == http.StatusConflict, s == http.StatusTooManyRequests, s >= 500:
		return true
	}
	return false
}
