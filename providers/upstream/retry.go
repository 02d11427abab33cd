package upstream

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxHint bounds any advised wait. Far above what a client will ever be told (SPEC caps
// Retry-After at 60 s); it only keeps absurd header values from overflowing a Duration.
const maxHint = 24 * time.Hour

// RetryHint returns the wait a backend advises in its response headers, or zero when it gives
// none or only garbage. Sources, first match wins:
//
//  1. retry-after-ms: float milliseconds (what the OpenAI and Anthropic SDKs read first);
//  2. Retry-After: seconds (float accepted) or an HTTP-date, relative to now;
//  3. OpenAI x-ratelimit-reset-{requests,tokens}: Go-style durations ("1s", "6m0s");
//  4. Anthropic anthropic-ratelimit-*-reset: RFC 3339 instants, relative to now.
//
// For 3 and 4 the bucket that is empty (its remaining-* header is "0") is the one that
// matters; when several are empty the longest wait wins, when none is the requests bucket
// is used.
func RetryHint(h http.Header, now time.Time) time.Duration {
	if v := h.Get("retry-after-ms"); v != "" {
		if ms, ok := parseFloat(v); ok {
			return clamp(ms * float64(time.Millisecond))
		}
	}
	if v := h.Get("Retry-After"); v != "" {
		if s, ok := parseFloat(v); ok {
			return clamp(s * float64(time.Second))
		}
		if t, err := http.ParseTime(v); err == nil {
			return clamp(float64(t.Sub(now)))
		}
	}
	if d := bucketHint(h, "x-ratelimit-remaining-", "x-ratelimit-reset-",
		[]string{"requests", "tokens"}, func(v string) (time.Duration, bool) { return ParseDuration(v) }); d > 0 {
		return d
	}
	return bucketHint(h, "anthropic-ratelimit-", "anthropic-ratelimit-",
		[]string{"requests", "tokens", "input-tokens", "output-tokens"},
		func(v string) (time.Duration, bool) {
			t, err := time.Parse(time.RFC3339, strings.TrimSpace(v))
			if err != nil {
				return 0, false
			}
			return clamp(float64(t.Sub(now))), true
		})
}

// bucketHint picks the reset of the exhausted bucket(s) named by buckets (the first one is the
// requests bucket). Header names are remPrefix+bucket(+"-remaining" for Anthropic) and
// resetPrefix+bucket(+"-reset").
func bucketHint(h http.Header, remPrefix, resetPrefix string, buckets []string,
	parse func(string) (time.Duration, bool)) time.Duration {
	anthropic := remPrefix == resetPrefix
	var exhausted, first time.Duration
	sawExhausted := false
	for i, b := range buckets {
		remName, resetName := remPrefix+b, resetPrefix+b
		if anthropic {
			remName, resetName = remName+"-remaining", resetName+"-reset"
		}
		v := h.Get(resetName)
		if v == "" {
			continue
		}
		d, ok := parse(v)
		if !ok || d <= 0 {
			continue
		}
		if strings.TrimSpace(h.Get(remName)) == "0" {
			sawExhausted = true
			exhausted = max(exhausted, d)
		}
		if i == 0 || first == 0 {
			first = d
		}
	}
	if sawExhausted {
		return exhausted
	}
	return first
}

// ParseDuration reads a Go duration ("6m0s", "12ms") or a protobuf Duration ("10.68s", as in
// Gemini's RetryInfo.retryDelay). Negative, non-finite or absurd values are rejected.
func ParseDuration(s string) (time.Duration, bool) {
	s = strings.TrimSpace(s)
	if s == "" || s[0] == '-' || s[0] == '+' {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d > maxHint {
		return 0, false
	}
	return d, true
}

// parseFloat reads a non-negative finite number.
func parseFloat(s string) (float64, bool) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return 0, false
	}
	return f, true
}

// clamp turns a float nanosecond count into a Duration in [0, maxHint].
func clamp(ns float64) time.Duration {
	switch {
	case !(ns > 0): // also NaN
		return 0
	case ns >= float64(maxHint):
		return maxHint
	}
	return time.Duration(ns)
}
