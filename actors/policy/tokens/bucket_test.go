package tokens

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// TestBurst pins what a configuration lets through: the default burst is ten seconds' worth,
// and a configured one replaces it (rpm 6 allows one call, then one every 10 s).
func TestBurst(t *testing.T) {
	tests := []struct {
		name       string
		rpm, burst int
		wantAtOnce int
		wantNext   time.Duration // wait for the request after the burst
	}{
		{"rpm 6 default", 6, 0, 1, 10 * time.Second},
		{"rpm 6 burst 3", 6, 3, 3, 10 * time.Second},
		{"rpm 60 default", 60, 0, 10, time.Second},
		{"rpm 600 burst 1", 600, 1, 1, 100 * time.Millisecond},
		{"rpm 7 rounds up", 7, 1, 1, 8571428572},
		// 60 s / 18 is not a whole number of nanoseconds: the burst must still fit exactly.
		{"rpm 18 default burst of 3", 18, 0, 3, 3333333334},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := New(tt.rpm, tt.burst)
			n := 0
			for b.Allow(1, t0) {
				b.Take(1, t0)
				n++
			}
			if n != tt.wantAtOnce {
				t.Errorf("%d requests at once, want %d", n, tt.wantAtOnce)
			}
			if w := b.Wait(1, t0); w != tt.wantNext {
				t.Errorf("next in %v, want %v", w, tt.wantNext)
			}
			if !b.Allow(1, t0.Add(tt.wantNext)) || b.Allow(1, t0.Add(tt.wantNext-1)) {
				t.Error("the wait is not exact")
			}
		})
	}
}

// TestFitsAndDrain: Fits tells a wait that ends from one only another charge can change, and
// a drained bucket owes its whole capacity.
func TestFitsAndDrain(t *testing.T) {
	b := New(60, 3)
	for _, tt := range []struct {
		taken, n int
		want     bool
	}{{0, 3, true}, {2, 1, true}, {3, 1, false}, {0, 10, true}, {1, 10, false}} {
		if got := b.Fits(tt.taken, tt.n); got != tt.want {
			t.Errorf("Fits(%d, %d) = %v, want %v", tt.taken, tt.n, got, tt.want)
		}
	}
	b.Drain(t0)
	if lv := b.Level(t0); lv != 0 {
		t.Errorf("drained level %d, want 0", lv)
	}
	if w := b.Wait(1, t0); w != time.Second {
		t.Errorf("drained: next in %v, want 1s", w)
	}
	l := NewLimiter(Limit{RPM: 60, TPM: 600, Burst: 2})
	if !l.Fits(1, 50, 50) || l.Fits(2, 0, 1) || l.Fits(0, 90, 20) {
		t.Error("Limiter.Fits does not combine its dimensions")
	}
	var u Bucket
	u.Drain(t0)
	if !u.Fits(1<<30, 5) || !u.Allow(5, t0) {
		t.Error("an unlimited bucket always fits")
	}
}

func TestUnlimited(t *testing.T) {
	var b Bucket
	b.Take(1000, t0)
	if !b.Allow(1<<20, t0) || b.Wait(5, t0) != 0 || b.Level(t0) != 0 || b.Limited() {
		t.Error("the zero bucket limits")
	}
	if l := (Limiter{}); l.Limited() {
		t.Error("the zero limiter limits")
	}
}

// TestLargeCharge: a request bigger than the bucket goes when it is full and leaves it in
// debt, so the rate holds on average.
func TestLargeCharge(t *testing.T) {
	b := New(600, 0) // 10 tokens a second, capacity 100
	if b.Capacity() != 100 {
		t.Fatalf("capacity %d", b.Capacity())
	}
	if !b.Allow(250, t0) {
		t.Fatal("a charge above the capacity must go when the bucket is full")
	}
	b.Take(250, t0)
	if got := b.Level(t0); got != -150 {
		t.Errorf("level %d, want -150", got)
	}
	// Full again after 25 s; a 1-token request may go once 1 token of debt is left below C.
	if w := b.Wait(1, t0); w != 15*time.Second+100*time.Millisecond {
		t.Errorf("wait %v", w)
	}
	if w := b.Wait(250, t0); w != 25*time.Second {
		t.Errorf("wait for another large one %v, want 25s (a full bucket)", w)
	}
}

func TestAdjust(t *testing.T) {
	b := New(60, 10) // one token a second
	b.Take(8, t0)
	b.Adjust(-3, t0) // used 5
	if got := b.Level(t0); got != 5 {
		t.Errorf("after a refund: %d, want 5", got)
	}
	b.Adjust(-100, t0)
	if got := b.Level(t0); got != 10 {
		t.Errorf("a refund never fills beyond capacity: %d", got)
	}
	b.Adjust(4, t0)
	if got := b.Level(t0.Add(2 * time.Second)); got != 8 {
		t.Errorf("after more usage and 2s: %d, want 8", got)
	}
	var l Limiter = NewLimiter(Limit{TPM: 600})
	l.Take(100, t0)
	l.Correct(100, 0, t0) // nothing reported: the estimate stands
	if lv := l.Levels(t0); lv.TPM != 0 || lv.TPMCapacity != 100 || lv.RPMCapacity != 0 {
		t.Errorf("levels %+v", lv)
	}
	l.Correct(100, 40, t0)
	if lv := l.Levels(t0); lv.TPM != 60 {
		t.Errorf("after the correction: %+v", lv)
	}
}

func TestLimiterDimension(t *testing.T) {
	l := NewLimiter(Limit{RPM: 60, TPM: 6000, Burst: 1}) // rpm: 1 now then 1/s; tpm: 1000, 100/s
	if w, d := l.Wait(500, t0); w != 0 || d != None {
		t.Fatalf("fresh limiter: %v %q", w, d)
	}
	l.Take(900, t0)
	if w, d := l.Wait(10, t0); w != time.Second || d != RPM {
		t.Errorf("held by rpm: %v %q", w, d)
	}
	if w, d := l.Wait(500, t0); w != 4*time.Second || d != TPM {
		t.Errorf("held by tpm: %v %q", w, d)
	}
}

func TestEstimate(t *testing.T) {
	tests := []struct{ prompt, out, limit, want int }{
		{100, 50, 0, 150},
		{100, 0, 0, 100 + DefaultOutputEstimate},
		{100, 50, 120, 120},
		{-5, 10, 0, 10},
	}
	for _, tt := range tests {
		if got := Estimate(tt.prompt, tt.out, tt.limit); got != tt.want {
			t.Errorf("Estimate(%d, %d, %d) = %d, want %d", tt.prompt, tt.out, tt.limit, got, tt.want)
		}
	}
}

// refBucket is the slow model: a float credit of tokens topped up on every call.
type refBucket struct {
	rate, capacity float64 // tokens per nanosecond; tokens
	credit         float64
	at             time.Time
}

func (m *refBucket) refill(now time.Time) {
	m.credit = math.Min(m.capacity, m.credit+float64(now.Sub(m.at))*m.rate)
	m.at = now
}

func (m *refBucket) wait(n int, now time.Time) time.Duration {
	m.refill(now)
	need := math.Min(float64(n), m.capacity)
	if m.credit >= need {
		return 0
	}
	return time.Duration((need - m.credit) / m.rate)
}

// TestBucketAgainstReference compares every Wait with the float model (within a microsecond
// of rounding) and checks the burst bound: over any minute, at most rate+capacity tokens are
// taken by requests the bucket allowed.
func TestBucketAgainstReference(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 11))
		rate := []int{6, 60, 600, 7, 200000}[rng.IntN(5)]
		burst := rng.IntN(4) * rate / 4
		b := New(rate, burst)
		m := &refBucket{rate: float64(rate) / float64(time.Minute), capacity: float64(b.Capacity()), at: t0}
		m.credit = m.capacity
		now := t0
		type take struct {
			at time.Time
			n  int
		}
		var taken []take
		for step := range 300 {
			now = now.Add(time.Duration(rng.IntN(int(time.Minute/time.Duration(rate)) * 3)))
			n := 1 + rng.IntN(max(1, b.Capacity()*3/2))
			got, want := b.Wait(n, now), m.wait(n, now)
			if d := got - want; d > time.Microsecond || d < -time.Microsecond {
				t.Fatalf("seed %d step %d: Wait(%d) = %v, model %v", seed, step, n, got, want)
			}
			switch {
			case got == 0 && rng.IntN(4) > 0:
				b.Take(n, now)
				m.credit -= float64(n)
				taken = append(taken, take{now, min(n, b.Capacity())})
			case got == 0:
				used := rng.IntN(n + 1)
				b.Take(n, now)
				m.credit -= float64(n)
				b.Adjust(used-n, now)
				m.refill(now)
				m.credit = math.Min(m.capacity, m.credit+float64(n-used))
			}
		}
		for i, a := range taken {
			sum := 0
			for _, b := range taken[i:] {
				if b.at.Sub(a.at) < time.Minute {
					sum += b.n
				}
			}
			if sum > rate+b.Capacity() {
				t.Fatalf("seed %d: %d tokens within a minute from %v, bound %d", seed, sum, a.at.Sub(t0), rate+b.Capacity())
			}
		}
	}
}
