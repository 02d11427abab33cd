package capacity

import (
	"math/rand/v2"
	"testing"
	"time"
)

// event is one signal fed to the learner, kept for the reference to replay.
type event struct {
	at      time.Time
	op      int // 0 success, 1 stated, 2 unexplained limit, 3 remaining
	busy    bool
	n       int // stated limit, running count, or remaining
	started time.Time
	reset   time.Duration
}

// refEffective is the slow model: the effective lanes after events, recomputed from the
// whole history by folding the rules of the package doc over it, one sentence at a time.
func refEffective(cfg Config, events []event) int {
	lanes := max(cfg.Lanes, 1)
	probe := cfg.Probe
	if probe <= 0 {
		probe = DefaultProbe
	}
	if cfg.Disabled {
		return lanes
	}
	eff, known, refused := lanes, lanes, 0 // known: highest level known to work
	var count int
	var cut time.Time
	var holdSet bool
	var holdEnd time.Time
	for _, e := range events {
		switch e.op {
		case 1: // a stated limit sets the lanes at once
			n := min(max(e.n, 1), lanes)
			if eff > known || n < known {
				refused++
			}
			known, cut, count = n, e.at, 0
			eff = n
		case 2: // an unexplained limit while full halves them, once per cut
			if e.n >= eff && !e.started.Before(cut) {
				half := max(1, eff/2)
				known = max(half, min(known, eff-1))
				refused++
				cut, count = e.at, 0
				eff = half
			}
		case 3: // remaining 0 holds growth until the reset, or until more is reported
			holdSet = e.n <= 0
			holdEnd = time.Time{}
			if holdSet && e.reset > 0 {
				holdEnd = e.at.Add(e.reset)
			}
		case 0: // busy successes grow them by one, damped above the known level
			held := holdSet && (holdEnd.IsZero() || e.at.Before(holdEnd))
			if !e.busy || eff >= lanes || held {
				continue
			}
			count++
			need := probe
			if eff >= known {
				need = probe << min(refused, maxDamping)
			}
			if count >= need {
				if eff > known {
					known, refused = eff, 0
				}
				eff++
				count = 0
			}
		}
	}
	return eff
}

// TestAgainstReference drives a Lanes and the replaying model with the same random signals
// and compares the effective lanes after every one.
func TestAgainstReference(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 17))
		cfg := Config{Lanes: 1 + rng.IntN(9), Probe: 1 + rng.IntN(4), Disabled: rng.IntN(8) == 0}
		now := t0
		l := New(cfg, now)
		var history []event
		for step := range 300 {
			now = now.Add(time.Duration(rng.IntN(400)) * time.Millisecond)
			e := event{at: now, op: []int{0, 0, 0, 0, 1, 2, 2, 3}[rng.IntN(8)]}
			switch e.op {
			case 0:
				e.busy = rng.IntN(5) > 0
				l.Succeeded(e.busy, now)
			case 1:
				e.n = rng.IntN(cfg.Lanes+3) - 1
				l.Stated(e.n, now)
			case 2:
				e.n = rng.IntN(cfg.Lanes + 2)
				e.started = now.Add(-time.Duration(rng.IntN(1500)) * time.Millisecond)
				l.RateLimited(e.n, e.started, now)
			case 3:
				e.n = rng.IntN(3) - 1
				e.reset = time.Duration(rng.IntN(3)) * time.Second
				l.Remaining(e.n, e.reset, now)
			}
			history = append(history, e)
			if got, want := l.Effective(), refEffective(cfg, history); got != want {
				t.Fatalf("seed %d step %d (op %d): effective %d, model %d", seed, step, e.op, got, want)
			}
		}
	}
}
