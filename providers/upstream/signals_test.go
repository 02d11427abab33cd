package upstream

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

func TestStatedLimit(t *testing.T) {
	tests := []struct {
		name, body string
		want       int
	}{
		{"empty", ``, 0},
		{"llama.cpp slots", `{"status":"no slot available","slots_idle":0,"slots_processing":3}`, 3},
		{"llama.cpp slots, some idle", `{"slots_idle":1,"slots_processing":3}`, 4},
		{"named field at top", `{"error":"too many","max_concurrency":6}`, 6},
		{"named field in error", `{"error":{"message":"busy","concurrency_limit":"2"}}`, 2},
		{"in use", `{"error":{"message":"busy","in_use":5}}`, 5},
		{"limit wins over in use", `{"in_use":5,"max_concurrent_requests":4}`, 4},
		{"fraction is not a count", `{"max_concurrency":2.5}`, 0},
		{"negative", `{"max_concurrency":-1}`, 0},
		{"absurd", `{"max_concurrency":1e12}`, 0},
		{"fakellm text", `{"error":{"message":"Rate limit reached: more than 3 concurrent requests. Please try again in 1s."}}`, 3},
		{"slots text", `model busy: 4/4 slots in use`, 4},
		{"limit of", `You have reached the limit of 8 concurrent requests`, 8},
		{"concurrency limit is", `{"message":"concurrency limit is 2"}`, 2},
		{"concurrent requests limit:", `concurrent requests limit: 16`, 16},
		{"max N parallel", `max 2 parallel predictions`, 2},
		{"anthropic says no number", `{"type":"error","error":{"type":"rate_limit_error","message":"Number of concurrent connections has exceeded your rate limit."}}`, 0},
		{"rpm is not concurrency", `{"error":{"message":"Rate limit reached on requests per min (RPM): Limit 60, Used 60"}}`, 0},
		{"ollama queue", `{"error":"server busy, please try again.  maximum pending requests exceeded"}`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := StatedLimit([]byte(tt.body)); got != tt.want {
				t.Errorf("StatedLimit = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestParseQuota(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	h := func(kv ...string) http.Header {
		hd := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			hd.Set(kv[i], kv[i+1])
		}
		return hd
	}
	at := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339) }
	tests := []struct {
		name string
		h    http.Header
		want llm.Quota
		ok   bool
	}{
		{"none", h(), llm.NoQuota, false},
		{"openai", h("x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "12ms",
			"x-ratelimit-remaining-tokens", "900", "x-ratelimit-reset-tokens", "1m30s"),
			llm.Quota{RequestsRemaining: 0, TokensRemaining: 900, RequestsReset: 12 * time.Millisecond, TokensReset: 90 * time.Second}, true},
		{"openai garbage count", h("x-ratelimit-remaining-requests", "lots"), llm.NoQuota, false},
		{"openai bad reset", h("x-ratelimit-remaining-requests", "3", "x-ratelimit-reset-requests", "soon"),
			llm.Quota{RequestsRemaining: 3, TokensRemaining: -1}, true},
		{"anthropic", h("anthropic-ratelimit-requests-remaining", "0", "anthropic-ratelimit-requests-reset", at(7*time.Second),
			"anthropic-ratelimit-tokens-remaining", "100", "anthropic-ratelimit-tokens-reset", at(3*time.Second)),
			llm.Quota{RequestsRemaining: 0, TokensRemaining: 100, RequestsReset: 7 * time.Second, TokensReset: 3 * time.Second}, true},
		{"anthropic split tokens: the smaller binds", h("anthropic-ratelimit-input-tokens-remaining", "5000",
			"anthropic-ratelimit-output-tokens-remaining", "10", "anthropic-ratelimit-output-tokens-reset", at(40*time.Second)),
			llm.Quota{RequestsRemaining: -1, TokensRemaining: 10, TokensReset: 40 * time.Second}, true},
		{"anthropic reset in the past", h("anthropic-ratelimit-requests-remaining", "1", "anthropic-ratelimit-requests-reset", at(-time.Second)),
			llm.Quota{RequestsRemaining: 1, TokensRemaining: -1}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseQuota(tt.h, now)
			if got != tt.want || ok != tt.ok {
				t.Errorf("ParseQuota = %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestAnnotate(t *testing.T) {
	now := time.Now()
	body := []byte(`{"slots_idle":0,"slots_processing":2}`)
	h := http.Header{"X-Ratelimit-Remaining-Requests": {"0"}}
	e := Annotate(&llm.Error{Kind: llm.KindUpstreamRateLimited}, h, body, now)
	if e.StatedLimit != 2 || e.Quota == nil || e.Quota.RequestsRemaining != 0 {
		t.Errorf("rate limit: %+v", e)
	}
	e = Annotate(&llm.Error{Kind: llm.KindUpstreamInvalid}, nil, body, now)
	if e.StatedLimit != 0 || e.Quota != nil {
		t.Errorf("a request error states no capacity: %+v", e)
	}
	if Annotate(nil, h, body, now) != nil {
		t.Error("nil in, nil out")
	}
}

func TestKeyRingTurnAndAt(t *testing.T) {
	r := NewKeyRing([]string{"a", "b", "c"}, map[string][]string{"m": {"m1"}})
	if r.Count("x") != 3 || r.Count("m") != 1 || NewKeyRing(nil, nil).Count("x") != 1 {
		t.Error("Count")
	}
	for want := range 4 {
		i, k := r.Turn("x")
		if i != want%3 || k != []string{"a", "b", "c"}[want%3] {
			t.Errorf("Turn %d = %d %q", want, i, k)
		}
	}
	if r.At("x", 1) != "b" || r.At("x", 4) != "b" || r.At("x", -1) != "c" || r.At("m", 7) != "m1" {
		t.Error("At")
	}
	if i, k := NewKeyRing(nil, nil).Turn("x"); i != 0 || k != "" {
		t.Errorf("no keys: %d %q", i, k)
	}
}

func FuzzStatedLimit(f *testing.F) {
	for _, s := range []string{`{"slots_idle":0,"slots_processing":3}`, `{"error":{"in_use":"4"}}`,
		`more than 3 concurrent requests`, `9/9 slots`, `{"max_concurrency":1e400}`, `{"error":[]}`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if n := StatedLimit(b); n < 0 || n > maxStatedLimit {
			t.Fatalf("StatedLimit = %d out of range", n)
		}
	})
}

func FuzzParseQuota(f *testing.F) {
	f.Add("0", "12ms", "5", "2026-12-01T12:00:30Z")
	f.Add("-1", "1e9h", "x", "not a time")
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, rem, reset, arem, areset string) {
		h := http.Header{}
		h.Set("x-ratelimit-remaining-requests", rem)
		h.Set("x-ratelimit-reset-requests", reset)
		h.Set("anthropic-ratelimit-tokens-remaining", arem)
		h.Set("anthropic-ratelimit-tokens-reset", areset)
		q, ok := ParseQuota(h, now)
		if q.RequestsRemaining < -1 || q.TokensRemaining < -1 || q.RequestsReset < 0 || q.TokensReset < 0 || q.RequestsReset > maxHint || q.TokensReset > maxHint {
			t.Fatalf("ParseQuota = %+v", q)
		}
		if ok != q.Known() {
			t.Fatalf("ok %v but Known %v", ok, q.Known())
		}
	})
}

// TestQuotaHeaderNames: the canonical names ParseQuota looks up are what http.Header makes of
// the names backends send.
func TestQuotaHeaderNames(t *testing.T) {
	names := []string{"X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests", "X-Ratelimit-Remaining-Tokens",
		"X-Ratelimit-Reset-Tokens", "Anthropic-Ratelimit-Requests-Remaining", "Anthropic-Ratelimit-Requests-Reset"}
	for _, b := range anthropicTokens {
		names = append(names, b.remaining, b.reset)
	}
	for _, n := range names {
		if c := http.CanonicalHeaderKey(strings.ToLower(n)); c != n {
			t.Errorf("%s is not canonical: %s", n, c)
		}
	}
}
