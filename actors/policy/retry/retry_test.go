package retry

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

func TestClassOf(t *testing.T) {
	tests := []struct {
		err  error
		want Class
	}{
		{nil, Success},
		{context.Canceled, ClientGone},
		{fmt.Errorf("open: %w", context.DeadlineExceeded), ClientGone},
		{&llm.Error{Kind: llm.KindUpstreamRateLimited}, RateLimited},
		{&llm.Error{Kind: llm.KindUpstreamAuth}, BadKey},
		{&llm.Error{Kind: llm.KindProviderUnavailable}, Down},
		{&llm.Error{Kind: llm.KindUpstream, Err: errors.New("connection refused")}, Down},
		{&llm.Error{Kind: llm.KindUpstreamTruncated}, Down},
		{errors.New("anything else is the backend's failure"), Down},
		{&llm.Error{Kind: llm.KindUpstreamInvalid}, Fatal},
		{&llm.Error{Kind: llm.KindUpstreamQuota}, Fatal},
		{&llm.Error{Kind: llm.KindRunTimeout}, Fatal},
	}
	for _, tt := range tests {
		if got := ClassOf(tt.err); got != tt.want {
			t.Errorf("ClassOf(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

func TestDecide(t *testing.T) {
	p := Policy{} // retries 2, max wait 2s
	tests := []struct {
		name   string
		a      Attempt
		jitter float64
		want   Decision
	}{
		{"success", Attempt{Class: Success, Made: 1}, 0, Decision{Why: "success"}},
		{"client gone", Attempt{Class: ClientGone, Made: 1, KeyFree: true}, 0, Decision{Why: "client gone"}},
		{"after the first byte", Attempt{Class: Down, Made: 1, FirstByte: true, KeyFree: true}, 0, Decision{Why: "first byte sent"}},
		{"request error", Attempt{Class: Fatal, Made: 1, KeyFree: true}, 0, Decision{Why: "not retryable"}},
		{"rate limit, another key at once", Attempt{Class: RateLimited, Made: 1, Hint: 30 * time.Second, KeyFree: true}, 0.9,
			Decision{Retry: true, OtherKey: true}},
		{"bad key, another key", Attempt{Class: BadKey, Made: 1, KeyFree: true}, 0, Decision{Retry: true, OtherKey: true}},
		{"bad key, none left", Attempt{Class: BadKey, Made: 1, KeyWait: time.Second}, 0, Decision{Why: "no other key"}},
		{"rate limit, keys cooling 1.5s", Attempt{Class: RateLimited, Made: 1, Hint: time.Second, KeyWait: 1500 * time.Millisecond}, 0,
			Decision{Retry: true, OtherKey: true, Wait: 1500 * time.Millisecond}},
		{"rate limit, keys cooling past max wait", Attempt{Class: RateLimited, Made: 1, Hint: 7 * time.Second, KeyWait: 7 * time.Second}, 0,
			Decision{Wait: 7 * time.Second, Why: "wait past max_retry_wait"}},
		{"rate limit, every key invalid", Attempt{Class: RateLimited, Made: 1, KeyWait: -1}, 0, Decision{Why: "no other key"}},
		{"down, first backoff", Attempt{Class: Down, Made: 1, KeyFree: true}, 0.5,
			Decision{Retry: true, OtherKey: true, Backoff: true, Wait: 125 * time.Millisecond}},
		{"down, second backoff honours the hint", Attempt{Class: Down, Made: 2, Backoffs: 1, Hint: 800 * time.Millisecond}, 0.5,
			Decision{Retry: true, Backoff: true, Wait: 800 * time.Millisecond}},
		{"down, hint past max wait", Attempt{Class: Down, Made: 1, Hint: 3 * time.Second}, 0,
			Decision{Wait: 3 * time.Second, Why: "wait past max_retry_wait"}},
		{"retries exhausted", Attempt{Class: Down, Made: 3, Backoffs: 2, KeyFree: true}, 0, Decision{Why: "retries exhausted"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := p.Decide(tt.a, tt.jitter); got != tt.want {
				t.Errorf("Decide = %+v, want %+v", got, tt.want)
			}
		})
	}
	if d := (Policy{Retries: -1}).Decide(Attempt{Class: Down, Made: 1, KeyFree: true}, 0); d.Retry {
		t.Error("retries: 0 (configured as -1) still retried")
	}
	if d := (Policy{Retries: 5, MaxWait: time.Minute}).Decide(Attempt{Class: Down, Made: 5, Backoffs: 4}, 0.999); !d.Retry || d.Wait >= 4*time.Second || d.Wait < 3*time.Second {
		t.Errorf("fifth retry: %+v (want under 250ms×16 = 4s)", d)
	}
}

// TestCallsProperty simulates many calls with random outcomes through Decide and checks the
// promises of the rule: never more attempts than 1+retries, never a retry after the first
// byte or of a class retrying cannot fix, never a wait past max_retry_wait or under the hint,
// never a backoff above its ceiling.
func TestCallsProperty(t *testing.T) {
	classes := []Class{RateLimited, BadKey, Down, Down, Fatal, ClientGone, Success}
	for seed := range uint64(2000) {
		rng := rand.New(rand.NewPCG(seed, 3))
		p := Policy{Retries: rng.IntN(5) - 1, MaxWait: time.Duration(rng.IntN(4000)) * time.Millisecond}
		a := Attempt{Made: 1}
		for {
			a.Class = classes[rng.IntN(len(classes))]
			a.Hint = time.Duration(rng.IntN(3000)) * time.Millisecond * time.Duration(rng.IntN(2))
			a.FirstByte = rng.IntN(5) == 0
			a.KeyFree = rng.IntN(2) == 0
			a.KeyWait = time.Duration(rng.IntN(3000)-300) * time.Millisecond
			d := p.Decide(a, rng.Float64())
			if !d.Retry {
				break
			}
			switch {
			case a.Made+1 > 1+p.retries():
				t.Fatalf("seed %d: attempt %d allowed with retries %d", seed, a.Made+1, p.retries())
			case a.FirstByte:
				t.Fatalf("seed %d: retry after the first byte", seed)
			case a.Class == Fatal || a.Class == ClientGone || a.Class == Success:
				t.Fatalf("seed %d: retried class %v", seed, a.Class)
			case d.Wait > p.maxWait():
				t.Fatalf("seed %d: wait %v past max %v", seed, d.Wait, p.maxWait())
			case d.Wait > 0 && d.Wait < a.Hint:
				t.Fatalf("seed %d: wait %v under the hint %v", seed, d.Wait, a.Hint)
			case d.Backoff && d.Wait > max(a.Hint, BaseBackoff<<a.Backoffs):
				t.Fatalf("seed %d: backoff %v above its ceiling", seed, d.Wait)
			case !d.Backoff && !d.OtherKey:
				t.Fatalf("seed %d: a retry that is neither a backoff nor a key move: %+v", seed, d)
			}
			a.Made++
			if d.Backoff {
				a.Backoffs++
			}
		}
	}
}
