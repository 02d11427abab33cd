package keys

import (
	"math/rand/v2"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func TestCooldownFor(t *testing.T) {
	r := New(1, Config{Cooldown: 10 * time.Second, MaxCooldown: time.Minute})
	tests := []struct {
		hint, want time.Duration
	}{
		{0, 10 * time.Second},            // no hint: key_cooldown
		{-time.Second, 10 * time.Second}, // garbage hint: as none
		{1500 * time.Millisecond, 1500 * time.Millisecond},
		{time.Minute, time.Minute},
		{6 * time.Minute, time.Minute}, // capped by max_key_cooldown
	}
	for _, tt := range tests {
		if got := r.CooldownFor(tt.hint); got != tt.want {
			t.Errorf("CooldownFor(%v) = %v, want %v", tt.hint, got, tt.want)
		}
	}
	if d := New(1, Config{}).CooldownFor(0); d != DefaultCooldown {
		t.Errorf("default cooldown %v", d)
	}
	if d := New(1, Config{Cooldown: time.Hour, MaxCooldown: time.Minute}).CooldownFor(0); d != time.Minute {
		t.Errorf("a cooldown above the cap is capped: %v", d)
	}
}

// TestRotation: round-robin over ready keys, a cooled key skipped and re-probed exactly at
// the end of its hint, a refused one not picked again before its re-probe.
func TestRotation(t *testing.T) {
	r := New(3, Config{})
	pick := func(now time.Time) int {
		t.Helper()
		i, ok := r.Pick(-1, now, nil)
		if !ok {
			t.Fatalf("no key at %v", now.Sub(t0))
		}
		return i
	}
	if got := []int{pick(t0), pick(t0), pick(t0), pick(t0)}; got[0] != 0 || got[1] != 1 || got[2] != 2 || got[3] != 0 {
		t.Fatalf("round robin %v", got)
	}
	end := r.RateLimited(1, 1500*time.Millisecond, t0)
	if !end.Equal(t0.Add(1500 * time.Millisecond)) {
		t.Fatalf("cooldown ends %v", end.Sub(t0))
	}
	if got := []int{pick(t0), pick(t0), pick(t0)}; got[0] != 2 || got[1] != 0 || got[2] != 2 {
		t.Errorf("with key 1 cooling: %v, want [2 0 2]", got)
	}
	justBefore := end.Add(-time.Nanosecond)
	if s := r.State(1, -1, justBefore); s != Cooling {
		t.Errorf("key 1 at end-1ns is %v", s)
	}
	if s := r.State(1, -1, end); s != Ready {
		t.Errorf("key 1 at its cooldown's end is %v, want ready (re-probed)", s)
	}
	r.Refused(0, -1, WholeKey, "bad", false, end)
	for range 4 {
		if i := pick(end); i == 0 {
			t.Fatal("a set-aside key was picked")
		}
	}
	if r.AllRefused(-1, end) {
		t.Error("AllRefused with two good keys")
	}
	skipTried := func(i int) bool { return i == 1 }
	if i, ok := r.Pick(-1, end, skipTried); !ok || i != 2 {
		t.Errorf("Pick skipping key 1 = %d, %v", i, ok)
	}
	r.Refused(1, -1, WholeKey, "bad", false, end)
	r.Refused(2, -1, WholeKey, "bad", false, end)
	if _, ok := r.Pick(-1, end, nil); ok || !r.AllRefused(-1, end) || !r.NextFree(-1, end).Equal(end.Add(DefaultMaxCooldown)) {
		t.Error("all set aside: nothing to pick until the first re-probe")
	}
}

func TestNextFreeAndSnapshot(t *testing.T) {
	r := New(2, Config{})
	if !r.NextFree(-1, t0).Equal(t0) {
		t.Error("a ready key is free now")
	}
	r.RateLimited(0, 3*time.Second, t0)
	r.RateLimited(1, 2*time.Second, t0)
	r.RateLimited(1, time.Second, t0.Add(500*time.Millisecond)) // a shorter, later hint does not shorten it
	if got := r.NextFree(-1, t0); !got.Equal(t0.Add(2 * time.Second)) {
		t.Errorf("NextFree = %v, want 2s", got.Sub(t0))
	}
	snap := r.Snapshot(t0.Add(time.Second + time.Microsecond))
	if snap[0].State != "cooling" || snap[0].CooldownMs != 2000 || snap[1].CooldownMs != 1000 {
		t.Errorf("snapshot %+v", snap)
	}
	r.Refused(0, -1, WholeKey, "bad", false, t0)
	if got := r.NextFree(-1, t0); !got.Equal(t0.Add(2 * time.Second)) {
		t.Errorf("NextFree waits for the cooling key, not the set-aside one's re-probe: %v", got.Sub(t0))
	}
	if s := r.Snapshot(t0.Add(5 * time.Second)); s[0].State != "set_aside" || s[1].State != "ready" || s[1].CooldownMs != 0 {
		t.Errorf("snapshot %+v", s)
	}
}

// refRing is the slow model: every rate limit ever reported, and a key is cooling at now when
// any report's window [at, at+min(hint or cooldown, cap)) holds now.
type refRing struct {
	cfg     Config
	reports [][]struct{ at, end time.Time }
	aside   []time.Time // per key: its re-probe time once set aside (never probed here)
	next    int
}

func (m *refRing) setAside(i int, now time.Time) bool {
	return !m.aside[i].IsZero() && now.Before(m.aside[i])
}

func (m *refRing) cooling(i int, now time.Time) bool {
	for _, rep := range m.reports[i] {
		if !now.Before(rep.at) && now.Before(rep.end) {
			return true
		}
	}
	return false
}

// TestRingAgainstReference drives a Ring and the model with random operations and compares
// every answer; it also checks that no cooldown ever outlives its hint or the cap.
func TestRingAgainstReference(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 7))
		n := 1 + rng.IntN(4)
		cfg := Config{Cooldown: time.Duration(1+rng.IntN(10)) * time.Second, MaxCooldown: time.Duration(5+rng.IntN(20)) * time.Second}
		r := New(n, cfg)
		m := &refRing{cfg: cfg, reports: make([][]struct{ at, end time.Time }, n), aside: make([]time.Time, n)}
		now := t0
		for step := range 200 {
			now = now.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
			switch op := rng.IntN(10); {
			case op < 5: // pick, compared with the model's scan from its cursor
				got, ok := r.Pick(-1, now, nil)
				want, wok := -1, false
				for k := range n {
					i := (m.next + k) % n
					if !m.setAside(i, now) && !m.cooling(i, now) {
						want, wok = i, true
						m.next = (i + 1) % n
						break
					}
				}
				if ok != wok || ok && got != want {
					t.Fatalf("seed %d step %d: Pick = %d,%v; model %d,%v", seed, step, got, ok, want, wok)
				}
			case op < 9:
				i := rng.IntN(n)
				hint := []time.Duration{0, 0, time.Duration(rng.IntN(40000)) * time.Millisecond}[rng.IntN(3)]
				end := r.RateLimited(i, hint, now)
				limit := cfg.Cooldown
				if hint > 0 {
					limit = hint
				}
				limit = min(limit, cfg.MaxCooldown)
				m.reports[i] = append(m.reports[i], struct{ at, end time.Time }{now, now.Add(limit)})
				latest := now
				for _, rep := range m.reports[i] {
					if rep.end.After(latest) {
						latest = rep.end
					}
				}
				if end.After(latest) {
					t.Fatalf("seed %d: cooldown ends %v after the latest report's own end", seed, end.Sub(latest))
				}
			default:
				i := rng.IntN(n)
				r.Refused(i, -1, WholeKey, "bad", false, now)
				if m.aside[i].IsZero() { // a refusal that is not the probe's changes nothing
					m.aside[i] = now.Add(cfg.MaxCooldown)
				}
			}
			for i := range n {
				want := Ready
				switch {
				case m.setAside(i, now):
					want = SetAside
				case m.cooling(i, now):
					want = Cooling
				}
				if got := r.State(i, -1, now); got != want {
					t.Fatalf("seed %d step %d: key %d is %v, model says %v", seed, step, i, got, want)
				}
			}
		}
	}
}

func TestTurnAndReadyAt(t *testing.T) {
	r := New(3, Config{})
	if r.Turn() != 0 {
		t.Fatalf("turn %d", r.Turn())
	}
	r.Pick(-1, t0, nil)
	if r.Turn() != 1 {
		t.Errorf("turn after a pick %d, want 1", r.Turn())
	}
	end := r.RateLimited(1, 3*time.Second, t0)
	r.Refused(2, -1, WholeKey, "bad", false, t0)
	if at, ok := r.ReadyAt(1, -1); !ok || !at.Equal(end) {
		t.Errorf("ReadyAt(1) = %v %v, want %v", at, ok, end)
	}
	if at, ok := r.ReadyAt(0, -1); !ok || at.After(t0) {
		t.Errorf("ReadyAt(0) = %v %v: a ready key is ready now", at, ok)
	}
	if at, ok := r.ReadyAt(2, -1); !ok || !at.Equal(t0.Add(DefaultMaxCooldown)) {
		t.Errorf("ReadyAt(2) = %v %v: a set-aside key is ready at its re-probe", at.Sub(t0), ok)
	}
	if !r.Began(2, -1, t0.Add(DefaultMaxCooldown)) {
		t.Fatal("the first call after the re-probe time is not the probe")
	}
	if _, ok := r.ReadyAt(2, -1); ok {
		t.Error("a key whose probe is out has no time of its own to be ready")
	}
}
