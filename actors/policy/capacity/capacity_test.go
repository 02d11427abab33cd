package capacity

import (
	"math/rand/v2"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func TestRules(t *testing.T) {
	type step struct {
		op      string // stated N, limited (running, started before/after cut), ok (busy), idle, remaining
		n       int
		before  bool // limited: the refused call started before the last cut
		reset   time.Duration
		wantEff int
	}
	tests := []struct {
		name  string
		cfg   Config
		steps []step
	}{
		{"stated limit sets at once", Config{Lanes: 8}, []step{{op: "stated", n: 3, wantEff: 3}, {op: "stated", n: 3, wantEff: 3}}},
		{"stated limit clamped", Config{Lanes: 4}, []step{{op: "stated", n: 0, wantEff: 1}, {op: "stated", n: 9, wantEff: 4}}},
		{"unexplained limit halves, at least 1", Config{Lanes: 8}, []step{
			{op: "limited", n: 8, wantEff: 4}, {op: "limited", n: 4, wantEff: 2}, {op: "limited", n: 2, wantEff: 1}, {op: "limited", n: 1, wantEff: 1}}},
		{"not full: no cut", Config{Lanes: 8}, []step{{op: "limited", n: 7, wantEff: 8}}},
		{"a refusal from before the cut does not cut again", Config{Lanes: 8}, []step{
			{op: "limited", n: 8, wantEff: 4}, {op: "limited", n: 8, before: true, wantEff: 4}}},
		{"disabled never moves", Config{Lanes: 8, Disabled: true}, []step{
			{op: "stated", n: 2, wantEff: 8}, {op: "limited", n: 8, wantEff: 8}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := t0
			l := New(tt.cfg, now)
			for i, s := range tt.steps {
				started := now.Add(-time.Millisecond) // before the last step's cut
				now = now.Add(time.Second)
				if !s.before {
					started = now
				}
				switch s.op {
				case "stated":
					l.Stated(s.n, now)
				case "limited":
					l.RateLimited(s.n, started, now)
				}
				if got := l.Effective(); got != s.wantEff {
					t.Fatalf("step %d (%s %d): effective %d, want %d", i, s.op, s.n, got, s.wantEff)
				}
			}
		})
	}
}

func TestGrowthAndHold(t *testing.T) {
	now := t0
	l := New(Config{Lanes: 4, Probe: 3}, now)
	l.RateLimited(4, now, now) // 4 → 2, ceiling 3
	grow := func(busy bool, n int) {
		for range n {
			now = now.Add(time.Millisecond)
			l.Succeeded(busy, now)
		}
	}
	grow(false, 50)
	if l.Effective() != 2 {
		t.Fatal("grew on successes made with idle lanes")
	}
	grow(true, 2)
	if l.Effective() != 2 {
		t.Fatal("grew before lanes_probe successes")
	}
	ch, ok := l.Succeeded(true, now)
	if !ok || ch.From != 2 || ch.To != 3 || ch.Reason != Probed || l.Snapshot(now).Reason != Probed {
		t.Fatalf("third success: %+v %v", ch, ok)
	}
	l.Remaining(0, 0, now)
	grow(true, 100)
	if l.Effective() != 3 || !l.Snapshot(now).Held {
		t.Fatal("grew while remaining-requests was 0")
	}
	l.Remaining(5, 0, now)
	grow(true, 6) // at the ceiling the probe needs 3 << 1 = 6
	if l.Effective() != 4 {
		t.Fatalf("effective %d after the hold lifted", l.Effective())
	}
	grow(true, 100)
	if l.Effective() != 4 {
		t.Fatal("grew past the configured lanes")
	}
	// A hold with a reset time ends by itself.
	l.Stated(1, now)
	l.Remaining(0, 2*time.Second, now)
	if !l.Snapshot(now).Held || l.Snapshot(now.Add(2*time.Second)).Held {
		t.Fatal("a hold with a reset must end exactly at the reset")
	}
}

// backend is a closed-loop simulation: clients keep every effective lane busy, a backend
// with hidden limit c answers up to c at once and states its limit to the rest.
func simulate(l *Lanes, c *int, rounds int, now *time.Time, stated bool, seen func(eff int)) (refused int) {
	for range rounds {
		*now = now.Add(100 * time.Millisecond)
		eff := l.Effective()
		for i := range eff {
			switch {
			case i < *c:
				l.Succeeded(true, *now)
			case stated:
				l.Stated(*c, *now)
				refused++
			default:
				l.RateLimited(eff, *now, *now)
				refused++
			}
		}
		seen(l.Effective())
	}
	return refused
}

// TestSteadyHiddenLimit: a backend that takes fewer lanes than configured, as a pure
// simulation. Configured 8, hidden 3:
// effective reads 3 at once and settles, refusals become rare; the limit raised to 6 is found
// within a bounded number of calls and never exceeded by more than one probe.
func TestSteadyHiddenLimit(t *testing.T) {
	now := t0
	l := New(Config{Lanes: 8}, now)
	hidden := 3
	l.Stated(hidden, now)
	changes, last := 0, l.Effective()
	count := func(eff int) {
		if eff != last {
			changes++
			last = eff
		}
		if eff > hidden+1 {
			t.Fatalf("effective %d with hidden limit %d: more than one probe above it", eff, hidden)
		}
	}
	refused := simulate(l, &hidden, 2000, &now, true, count) // 6000 successful calls
	if l.Effective() < 3 || l.Effective() > 4 {
		t.Fatalf("effective %d, want 3 (or 4 while probing)", l.Effective())
	}
	if refused > 6000/(8*DefaultProbe)+3 {
		t.Errorf("%d refusals in 6000 calls: the probing does not settle", refused)
	}
	if changes > 2*refused+1 {
		t.Errorf("%d changes for %d refusals", changes, refused)
	}
	hidden = 6
	reached := -1
	for round := range 2000 {
		simulate(l, &hidden, 1, &now, true, count)
		if l.Effective() >= 6 && reached < 0 {
			reached = round
		}
	}
	// From 3: probes needing at most 8×20 successes at 3, 4 and 5 lanes busy.
	if reached < 0 || reached > (8*DefaultProbe)*3/3+DefaultProbe {
		t.Errorf("reached 6 after %d rounds", reached)
	}
	if e := l.Effective(); e < 6 || e > 7 {
		t.Errorf("effective %d with hidden limit 6", e)
	}
}

// TestProperties drives random signals and checks: never above the configured lanes, never
// below 1, growth only by one lane on a success with lanes busy and not held, disabled never
// moves, a repeated stated limit never moves the count after the first.
func TestProperties(t *testing.T) {
	for seed := range uint64(500) {
		rng := rand.New(rand.NewPCG(seed, 13))
		cfg := Config{Lanes: 1 + rng.IntN(10), Probe: 1 + rng.IntN(5), Disabled: rng.IntN(6) == 0}
		now := t0
		l := New(cfg, now)
		for step := range 400 {
			now = now.Add(time.Duration(rng.IntN(500)) * time.Millisecond)
			before := l.Effective()
			held := l.Snapshot(now).Held
			op := rng.IntN(10)
			switch {
			case op < 5:
				l.Succeeded(rng.IntN(4) > 0, now)
			case op < 7:
				l.Stated(rng.IntN(cfg.Lanes+3)-1, now)
			case op < 9:
				l.RateLimited(rng.IntN(cfg.Lanes+2), now.Add(-time.Duration(rng.IntN(2000))*time.Millisecond), now)
			default:
				l.Remaining(rng.IntN(3)-1, time.Duration(rng.IntN(3))*time.Second, now)
			}
			after := l.Effective()
			switch {
			case after < 1 || after > cfg.Lanes:
				t.Fatalf("seed %d step %d: effective %d outside [1, %d]", seed, step, after, cfg.Lanes)
			case cfg.Disabled && after != cfg.Lanes:
				t.Fatalf("seed %d: disabled moved to %d", seed, after)
			case after > before && op >= 7: // only a success or a stated limit raises it
				t.Fatalf("seed %d step %d: op %d raised %d → %d", seed, step, op, before, after)
			case after > before && op < 5 && (after != before+1 || held):
				t.Fatalf("seed %d step %d: grew %d → %d (held %v)", seed, step, before, after, held)
			}
			if op >= 5 && op < 7 { // the same statement again changes nothing
				n := after
				l.Stated(n, now)
				if l.Effective() != n {
					t.Fatalf("seed %d: a repeated stated limit %d moved to %d", seed, n, l.Effective())
				}
			}
		}
	}
}

// TestAdopt: lanes another replica learned are taken as they are, clamped to the
// configured lanes, with reason "shared"; learning goes on from them; disabled learning
// adopts nothing.
func TestAdopt(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		n       int
		changed bool
		want    int
	}{
		{"lower", Config{Lanes: 8}, 3, true, 3},
		{"clamped below", Config{Lanes: 8}, 0, true, 1},
		{"clamped above", Config{Lanes: 4}, 9, false, 4},
		{"the same", Config{Lanes: 4}, 4, false, 4},
		{"disabled", Config{Lanes: 4, Disabled: true}, 2, false, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := New(tt.cfg, t0)
			ch, changed := l.Adopt(tt.n, t0.Add(time.Second))
			if changed != tt.changed || l.Effective() != tt.want {
				t.Fatalf("Adopt(%d): changed %v, effective %d; want %v, %d", tt.n, changed, l.Effective(), tt.changed, tt.want)
			}
			if changed && (ch.Reason != Shared || ch.To != tt.want || l.Snapshot(t0).Reason != Shared) {
				t.Errorf("change %+v, snapshot reason %q; want to %d for reason shared", ch, l.Snapshot(t0).Reason, tt.want)
			}
		})
	}

	now := t0
	l := New(Config{Lanes: 4, Probe: 2}, now)
	l.Adopt(2, now)
	if _, ch := l.RateLimited(2, now.Add(-time.Millisecond), now.Add(time.Second)); ch {
		t.Error("a refusal of a call started before the adopted cut halved the lanes again")
	}
	l.Succeeded(true, now)
	if l.Succeeded(true, now); l.Effective() != 3 {
		t.Errorf("after probe successes at the adopted 2: effective %d, want 3", l.Effective())
	}
	if l.Adopt(4, now); l.Effective() != 4 {
		t.Errorf("a higher value learned elsewhere: effective %d, want 4", l.Effective())
	}
}
