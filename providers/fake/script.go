// Package fake is a scripted in-process backend. It is the gateway's `demo` provider (so a
// fresh install answers at once) and the backend of the gateway's own tests: each model follows
// a Script that sets the reply, the pacing and an injected failure.
package fake

import (
	"strings"
	"time"
	"unicode"
)

// The failures a Script can inject (Script.Fail).
const (
	FailNone        = ""
	FailRateLimited = "rate_limited" // Open fails: KindUpstreamRateLimited, with RetryAfter
	FailUnavailable = "unavailable"  // Open fails: KindProviderUnavailable
	FailInvalid     = "invalid"      // Open fails: KindUpstreamInvalid
	FailAuth        = "auth"         // Open fails: KindUpstreamAuth
	FailQuota       = "quota"        // Open fails: KindUpstreamQuota
	FailUpstream    = "upstream"     // Open fails: KindUpstream
	FailMidstream   = "midstream"    // Next fails with KindUpstream after half the tokens
	FailTruncated   = "truncated"    // Next fails with KindUpstreamTruncated after half the tokens: the answer stops without its finish reason
	FailHang        = "hang"         // Open blocks until its context is done
)

// Script is how the fake answers one model.
type Script struct {
	// Reply is the answer text. Empty means an echo: the demo greeting followed by the last
	// user message.
	Reply string
	// Reasoning, when set, is streamed before the reply as ReasoningContent.
	Reasoning string
	// FirstTokenDelay is waited before the first chunk; zero means none.
	FirstTokenDelay time.Duration
	// TokensPerSecond paces the chunks after the first; zero or negative means no pacing.
	// A token is a whitespace-separated word with the whitespace before it.
	TokensPerSecond float64
	// Fail injects a failure, one of the Fail* constants; empty means none. An unknown value
	// fails Open with KindUpstream so a typo in a test shows.
	Fail string
	// RetryAfter is the hint carried by FailRateLimited errors; zero means no hint.
	RetryAfter time.Duration
}

// Config configures a Backend.
type Config struct {
	// Name is the provider name put on errors.
	Name string
	// Models maps a backend model name to its script. ListModels lists these names.
	Models map[string]Script
	// Default is the script of any model not in Models.
	Default Script
}

// demoGreeting starts the reply of a Script with no Reply.
const demoGreeting = "Hello from Tollgate's demo backend."

// Tokenize splits s into tokens that concatenate back to s exactly: each token is a word
// with the whitespace before it; whitespace at the end sticks to the last token. The fake
// backends stream one token per chunk and count tokens this way.
func Tokenize(s string) []string {
	var toks []string
	start, inWord := 0, false
	for i, r := range s {
		space := unicode.IsSpace(r)
		if space && inWord { // a word ended: the token runs up to here
			toks = append(toks, s[start:i])
			start = i
		}
		inWord = !space
	}
	if start < len(s) {
		if len(toks) > 0 && strings.TrimSpace(s[start:]) == "" {
			toks[len(toks)-1] += s[start:]
		} else {
			toks = append(toks, s[start:])
		}
	}
	return toks
}
