package tokens

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestPerKeyReserve: a key of rpm 60 spends its minute's worth at once, then one call a
// second, each reservation waiting behind the last; a call that would wait past its limit is
// refused and charged nothing; a refund and a correction give tokens back; a changed rate
// starts full; keys do not share buckets; no rate keeps no buckets.
func TestPerKeyReserve(t *testing.T) {
	var p PerKey
	rpm60 := Rate{RPM: 60}
	for i := range 60 {
		if w, _, ok := p.Reserve("a", rpm60, 0, 0, t0); !ok || w != 0 {
			t.Fatalf("call %d of the burst: wait %s ok %v", i, w, ok)
		}
	}
	if w, dim, ok := p.Reserve("a", rpm60, 0, 500*time.Millisecond, t0); ok || w != time.Second || dim != RPM {
		t.Fatalf("past the burst with 500ms to wait: %s %q %v, want refused after 1s on rpm", w, dim, ok)
	}
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 3 * time.Second} {
		if w, dim, ok := p.Reserve("a", rpm60, 0, time.Minute, t0); !ok || w != want || dim != RPM {
			t.Fatalf("reservation %d past the burst: %s %q %v, want %s (the refusal charged nothing)", i, w, dim, ok, want)
		}
	}
	p.Refund("a", 0, t0)
	if w, _, _ := p.Reserve("a", rpm60, 0, time.Minute, t0); w != 3*time.Second {
		t.Fatalf("after a refund: wait %s, want the refunded 3s again", w)
	}
	if w, _, ok := p.Reserve("b", rpm60, 0, 0, t0); !ok || w != 0 {
		t.Fatalf("another key waited %s (ok %v): keys share nothing", w, ok)
	}
	if w, _, ok := p.Reserve("a", Rate{RPM: 120}, 0, 0, t0); !ok || w != 0 {
		t.Fatalf("a changed rate: wait %s ok %v, want new full buckets", w, ok)
	}

	tpm := Rate{TPM: 6000} // 100 tokens a second, 6000 at once
	if _, _, ok := p.Reserve("c", tpm, 5900, 0, t0); !ok {
		t.Fatal("5900 of 6000 tokens refused")
	}
	if w, dim, ok := p.Reserve("c", tpm, 600, time.Minute, t0); !ok || w != 5*time.Second || dim != TPM {
		t.Fatalf("600 more tokens: %s %q %v, want 5s on tpm", w, dim, ok)
	}
	p.Correct("c", 600, 100, t0) // the call used 100 of its 600
	if w, _, _ := p.Reserve("c", tpm, 100, time.Minute, t0); w != 1*time.Second {
		t.Fatalf("after the correction: wait %s, want 1s", w)
	}

	if _, _, ok := p.Reserve("d", Rate{}, 1e6, 0, t0); !ok || p.Keys() != 3 {
		t.Fatalf("no rate: ok %v, %d keys with buckets (want a, b, c)", ok, p.Keys())
	}
	p.Forget("b")
	if p.Keys() != 2 {
		t.Fatalf("%d keys after Forget, want 2", p.Keys())
	}
}

// TestPerKeyNeverPastTheRate: over random arrivals, limits and token counts, the calls a key
// of rpm R starts (each at its reservation's time plus its wait) never number more than
// R + R (the burst and a minute's refill) in any minute, and none waited past its limit.
func TestPerKeyNeverPastTheRate(t *testing.T) {
	for seed := range uint64(30) {
		rng := rand.New(rand.NewPCG(seed, 18))
		rate := Rate{RPM: 1 + rng.IntN(40)}
		var p PerKey
		var starts []time.Time
		now := t0
		for range 2000 {
			now = now.Add(time.Duration(rng.Int64N(int64(4 * time.Second))))
			limit := time.Duration(rng.Int64N(int64(30 * time.Second)))
			w, _, ok := p.Reserve("k", rate, 0, limit, now)
			if !ok {
				continue
			}
			if w > limit {
				t.Fatalf("seed %d: waited %s past its limit %s", seed, w, limit)
			}
			starts = append(starts, now.Add(w))
		}
		slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
		for i := range starts {
			j, _ := slices.BinarySearchFunc(starts, starts[i].Add(time.Minute), func(a, b time.Time) int { return a.Compare(b) })
			if n := j - i; n > 2*rate.RPM {
				t.Fatalf("seed %d: %d starts in the minute from %s at rpm %d", seed, n, starts[i].Sub(t0), rate.RPM)
			}
		}
	}
}
