package upstream

import (
	"net/http"
	"testing"
	"time"
)

func TestRetryHint(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	h := func(kv ...string) http.Header {
		hd := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			hd.Set(kv[i], kv[i+1])
		}
		return hd
	}
	tests := []struct {
		name string
		h    http.Header
		want time.Duration
	}{
		{"none", h(), 0},
		{"retry-after-ms float", h("retry-after-ms", "1500.5"), 1500500 * time.Microsecond},
		{"retry-after-ms wins over Retry-After", h("retry-after-ms", "250", "Retry-After", "9"), 250 * time.Millisecond},
		{"garbage ms falls through", h("retry-after-ms", "soon", "Retry-After", "2"), 2 * time.Second},
		{"Retry-After seconds", h("Retry-After", "7"), 7 * time.Second},
		{"Retry-After float seconds", h("Retry-After", "0.5"), 500 * time.Millisecond},
		{"Retry-After HTTP-date", h("Retry-After", now.Add(30*time.Second).Format(http.TimeFormat)), 30 * time.Second},
		{"Retry-After date in past", h("Retry-After", now.Add(-time.Minute).Format(http.TimeFormat)), 0},
		{"Retry-After negative", h("Retry-After", "-3"), 0},
		{"Retry-After NaN", h("Retry-After", "NaN"), 0},
		{"Retry-After Inf", h("Retry-After", "+Inf"), 0},
		{"Retry-After huge clamped", h("Retry-After", "1e300"), maxHint},
		{"Retry-After garbage", h("Retry-After", "tomorrow"), 0},
		{"openai requests reset", h("x-ratelimit-reset-requests", "1s", "x-ratelimit-reset-tokens", "6m0s"), time.Second},
		{"openai tokens exhausted", h("x-ratelimit-reset-requests", "1s", "x-ratelimit-reset-tokens", "6m0s",
			"x-ratelimit-remaining-requests", "5", "x-ratelimit-remaining-tokens", "0"), 6 * time.Minute},
		{"openai requests exhausted", h("x-ratelimit-reset-requests", "12ms", "x-ratelimit-reset-tokens", "6m0s",
			"x-ratelimit-remaining-requests", "0", "x-ratelimit-remaining-tokens", "100"), 12 * time.Millisecond},
		{"openai both exhausted takes larger", h("x-ratelimit-reset-requests", "2s", "x-ratelimit-reset-tokens", "1s",
			"x-ratelimit-remaining-requests", "0", "x-ratelimit-remaining-tokens", "0"), 2 * time.Second},
		{"openai only tokens reset", h("x-ratelimit-reset-tokens", "3s"), 3 * time.Second},
		{"openai garbage reset", h("x-ratelimit-reset-requests", "later"), 0},
		{"anthropic requests reset", h("anthropic-ratelimit-requests-reset", now.Add(20*time.Second).Format(time.RFC3339)), 20 * time.Second},
		{"anthropic tokens exhausted", h(
			"anthropic-ratelimit-requests-reset", now.Add(5*time.Second).Format(time.RFC3339),
			"anthropic-ratelimit-requests-remaining", "10",
			"anthropic-ratelimit-output-tokens-reset", now.Add(40*time.Second).Format(time.RFC3339),
			"anthropic-ratelimit-output-tokens-remaining", "0"), 40 * time.Second},
		{"anthropic in past", h("anthropic-ratelimit-requests-reset", now.Add(-time.Second).Format(time.RFC3339)), 0},
		{"anthropic garbage", h("anthropic-ratelimit-requests-reset", "2026-13-45"), 0},
		{"retry-after beats ratelimit headers", h("Retry-After", "3", "x-ratelimit-reset-requests", "1m0s"), 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RetryHint(tt.h, now); got != tt.want {
				t.Errorf("RetryHint = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"10.68s", 10680 * time.Millisecond, true},
		{"22s", 22 * time.Second, true},
		{"3.000000001s", 3*time.Second + 1, true},
		{"6m0s", 6 * time.Minute, true},
		{"12ms", 12 * time.Millisecond, true},
		{"1h2m3.5s", time.Hour + 2*time.Minute + 3500*time.Millisecond, true},
		{" 1s ", time.Second, true},
		{"0s", 0, true},
		{"0", 0, true},
		{"", 0, false},
		{"-1s", 0, false},
		{"+1s", 0, false},
		{"10", 0, false},
		{"s", 0, false},
		{"1e3s", 0, false},
		{"100000h", 0, false},
	}
	for _, tt := range tests {
		got, ok := ParseDuration(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"10.68s", "6m0s", "12ms", "-1s", "", "1e9h", "0.000000001s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := ParseDuration(s)
		if !ok && d != 0 {
			t.Fatalf("ParseDuration(%q) = %v with ok=false", s, d)
		}
		if d < 0 || d > maxHint {
			t.Fatalf("ParseDuration(%q) = %v out of range", s, d)
		}
	})
}

func FuzzRetryHint(f *testing.F) {
	f.Add("1500", "7", "1s", "0", "2026-11-29T12:00:30Z")
	f.Add("", "Sun, 29 Nov 2026 12:01:00 GMT", "6m0s", "5", "")
	f.Add("NaN", "-Inf", "garbage", "0", "not-a-time")
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, ms, ra, reset, remaining, anth string) {
		h := http.Header{}
		set := func(k, v string) {
			if v != "" {
				h.Set(k, v)
			}
		}
		set("retry-after-ms", ms)
		set("Retry-After", ra)
		set("x-ratelimit-reset-tokens", reset)
		set("x-ratelimit-remaining-tokens", remaining)
		set("anthropic-ratelimit-requests-reset", anth)
		d := RetryHint(h, now)
		if d < 0 || d > maxHint {
			t.Fatalf("RetryHint = %v out of range for %v", d, h)
		}
	})
}
