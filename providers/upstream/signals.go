package upstream

import (
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// ParseQuota reads what an answer's headers say about the backend's rate-limit buckets, the
// signal that holds learned lanes (SPEC §11): OpenAI's x-ratelimit-remaining-{requests,tokens}
// with x-ratelimit-reset-* durations, and Anthropic's anthropic-ratelimit-requests-remaining,
// -tokens-remaining (else the smaller of -input-tokens- and -output-tokens-remaining) with
// RFC 3339 -reset instants, relative to now. ok is false when neither family is present.
// docs/capacity-signals.md lists which backend sends what.
func ParseQuota(h http.Header, now time.Time) (q llm.Quota, ok bool) {
	q = llm.NoQuota
	if n, ok := count(get(h, "X-Ratelimit-Remaining-Requests")); ok {
		q.RequestsRemaining = n
		q.RequestsReset, _ = ParseDuration(get(h, "X-Ratelimit-Reset-Requests"))
	}
	if n, ok := count(get(h, "X-Ratelimit-Remaining-Tokens")); ok {
		q.TokensRemaining = n
		q.TokensReset, _ = ParseDuration(get(h, "X-Ratelimit-Reset-Tokens"))
	}
	if n, ok := count(get(h, "Anthropic-Ratelimit-Requests-Remaining")); ok && q.RequestsRemaining < 0 {
		q.RequestsRemaining = n
		q.RequestsReset = instant(get(h, "Anthropic-Ratelimit-Requests-Reset"), now)
	}
	if q.TokensRemaining < 0 {
		for _, b := range anthropicTokens {
			n, ok := count(get(h, b.remaining))
			if !ok || q.TokensRemaining >= 0 && n >= q.TokensRemaining {
				continue
			}
			q.TokensRemaining, q.TokensReset = n, instant(get(h, b.reset), now)
			if b.remaining == anthropicTokens[0].remaining {
				break // the combined bucket, when sent, is the one that binds
			}
		}
	}
	return q, q.Known()
}

// anthropicTokens are Anthropic's token buckets, the combined one first.
var anthropicTokens = [...]struct{ remaining, reset string }{
	{"Anthropic-Ratelimit-Tokens-Remaining", "Anthropic-Ratelimit-Tokens-Reset"},
	{"Anthropic-Ratelimit-Input-Tokens-Remaining", "Anthropic-Ratelimit-Input-Tokens-Reset"},
	{"Anthropic-Ratelimit-Output-Tokens-Remaining", "Anthropic-Ratelimit-Output-Tokens-Reset"},
}

// get is h.Get(key) for a key already in canonical form: ParseQuota runs on every answer,
// and Get would canonicalize each of its lower-case names anew, allocating.
func get(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// count reads a non-negative whole number header value.
func count(v string) (int, bool) {
	if v == "" {
		return 0, false // the usual case, and Atoi would allocate an error for it
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// instant reads an RFC 3339 reset time as the wait from now; zero when absent, past or garbage.
func instant(v string, now time.Time) time.Duration {
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(v))
	if err != nil {
		return 0
	}
	return clamp(float64(t.Sub(now)))
}

// maxStatedLimit bounds a stated concurrency: no backend takes a million calls at once, and a
// bigger number is some other count.
const maxStatedLimit = 1 << 20

// StatedLimit reads the concurrency a refusal states (SPEC §11): the backend's limit, or its
// slots in use when it names no limit; 0 when it states neither. The forms recognised, in
// order (docs/capacity-signals.md says who sends which):
//
//  1. llama.cpp's slot counts in a JSON body: "slots_idle" + "slots_processing" slots in all;
//  2. a JSON number named max_concurrency, max_concurrent_requests, concurrency_limit or
//     max_parallel at the top level or inside "error"; else in_use / slots_in_use (in use);
//  3. the message text: "N/M slots", "limit of N concurrent", "concurrency limit (of|is|:) N",
//     "more than N concurrent (requests|calls)", "max N concurrent".
//
// A count of requests per minute (x-ratelimit-limit-requests) is not a concurrency and is not
// read here.
func StatedLimit(body []byte) int {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || len(body) > DefaultErrorBody {
		return 0
	}
	if n := statedInJSON(body); n > 0 {
		return n
	}
	return statedInText(string(body))
}

func statedInJSON(body []byte) int {
	var top map[string]json.RawMessage
	if body[0] != '{' || json.Unmarshal(body, &top) != nil {
		return 0
	}
	idle, okIdle := number(top["slots_idle"])
	busy, okBusy := number(top["slots_processing"])
	if okIdle && okBusy && idle+busy > 0 {
		return sane(idle + busy)
	}
	objects := []map[string]json.RawMessage{top}
	var inner map[string]json.RawMessage
	if json.Unmarshal(top["error"], &inner) == nil && inner != nil {
		objects = append(objects, inner)
	}
	for _, names := range [][]string{
		{"max_concurrency", "max_concurrent_requests", "concurrency_limit", "max_parallel"},
		{"in_use", "slots_in_use"},
	} {
		for _, o := range objects {
			for _, name := range names {
				if n, ok := number(o[name]); ok && n > 0 {
					return sane(n)
				}
			}
		}
	}
	return 0
}

// number reads a JSON whole number (or a string holding one).
func number(r json.RawMessage) (int, bool) {
	if len(r) == 0 {
		return 0, false
	}
	var f float64
	if json.Unmarshal(r, &f) == nil && f >= 0 && f == float64(int64(f)) && f <= maxStatedLimit {
		return int(f), true
	}
	var s string
	if json.Unmarshal(r, &s) == nil {
		return count(s)
	}
	return 0, false
}

func sane(n int) int {
	if n < 1 || n > maxStatedLimit {
		return 0
	}
	return n
}

// statedText are the message forms, each with the group holding the limit.
var statedText = []*regexp.Regexp{
	regexp.MustCompile(`(?i)\b\d+\s*/\s*(\d+)\s+(?:slots|lanes)\b`),
	regexp.MustCompile(`(?i)\blimit of (\d+) (?:concurrent|parallel)`),
	regexp.MustCompile(`(?i)\bconcurren(?:cy|t requests?) limit(?: of| is|:)?\s*(\d+)\b`),
	regexp.MustCompile(`(?i)\bmore than (\d+) (?:concurrent|parallel|simultaneous) (?:requests|calls|connections)\b`),
	regexp.MustCompile(`(?i)\bmax(?:imum)?(?: of)? (\d+) (?:concurrent|parallel|simultaneous)\b`),
}

func statedInText(s string) int {
	for _, re := range statedText {
		if m := re.FindStringSubmatch(s); m != nil {
			n, _ := strconv.Atoi(m[1])
			return sane(n)
		}
	}
	return 0
}

// Annotate adds to a backend's refusal what its headers and body say about capacity: the
// stated concurrency (rate limits and provider-down answers only) and the buckets' quota.
// It returns e.
func Annotate(e *llm.Error, h http.Header, body []byte, now time.Time) *llm.Error {
	if e == nil {
		return nil
	}
	if e.Kind == llm.KindUpstreamRateLimited || e.Kind == llm.KindProviderUnavailable {
		e.StatedLimit = StatedLimit(body)
	}
	if h != nil {
		if q, ok := ParseQuota(h, now); ok {
			e.Quota = &q
		}
	}
	return e
}
