package cli

import (
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// failure is what a decoder learned about a failed run: the CLI's own words and, when the
// CLI said so in a structured field, the kind. Kind zero (KindUpstream) means "classify the
// message".
type failure struct {
	kind       llm.Kind
	known      bool // kind came from a structured field, not guessed from text
	message    string
	retryAfter time.Duration
	status     int    // HTTP status the CLI reported from its backend, when it did
	code       string // the CLI's error code, e.g. claude's "authentication_failed"
}

// Phrases that identify a failure's kind when the CLI gives only text. Checked in order:
// quota before rate limit ("quota exceeded" often comes with 429), auth last.
var (
	quotaText = []string{"insufficient_quota", "quota exceeded", "exceeded your current quota",
		"credit balance", "billing", "out of credits", "usage limit"}
	rateText = []string{"rate limit", "rate_limit", "ratelimit", "429", "too many requests",
		"resource_exhausted", "try again in", "retry in"}
	authText = []string{"401", "403", "unauthorized", "forbidden", "authentication",
		"invalid api key", "invalid x-api-key", "invalid_api_key", "api key not valid",
		"missing environment variable", "not logged in", "/login", "please login",
		"permission denied: api key", "credentials"}
)

// classify turns text from a CLI (an error event, a failed result, stderr) into a kind.
func classify(text string) llm.Kind {
	t := strings.ToLower(text)
	switch {
	case containsAny(t, quotaText):
		return llm.KindUpstreamQuota
	case containsAny(t, rateText):
		return llm.KindUpstreamRateLimited
	case containsAny(t, authText):
		return llm.KindUpstreamAuth
	}
	return llm.KindUpstream
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// retryHint finds "try again in 7s", "retry in 1.5 seconds", "Please retry in 250ms".
var retryHint = regexp.MustCompile(`(?i)(?:try again|retry) in\s+([0-9]+(?:\.[0-9]+)?)\s*(ms|milliseconds?|s|sec|secs|seconds?|m|min|minutes?)\b`)

// retryAfterIn returns the wait a message asks for, or zero.
func retryAfterIn(text string) time.Duration {
	m := retryHint.FindStringSubmatch(text)
	if m == nil {
		return 0
	}
	n, err := strconv.ParseFloat(m[1], 64)
	if err != nil || n < 0 {
		return 0
	}
	unit := time.Second
	switch u := strings.ToLower(m[2]); {
	case strings.HasPrefix(u, "ms"), strings.HasPrefix(u, "milli"):
		unit = time.Millisecond
	case u == "m", strings.HasPrefix(u, "min"):
		unit = time.Minute
	}
	return time.Duration(n * float64(unit))
}

// toError builds the *llm.Error for a failed run. Messages are redacted: they reach clients.
func (f failure) toError(provider string, red redactor) *llm.Error {
	msg := red.redact(strings.TrimSpace(f.message))
	if msg == "" {
		msg = "the CLI failed without saying why"
	}
	kind := f.kind
	if !f.known {
		kind = classify(msg)
	}
	e := &llm.Error{Kind: kind, Message: msg, Provider: provider,
		UpstreamStatus: f.status, UpstreamCode: f.code}
	if kind == llm.KindUpstreamRateLimited {
		e.RetryAfter = f.retryAfter
		if e.RetryAfter == 0 {
			e.RetryAfter = retryAfterIn(msg)
		}
	}
	return e
}
