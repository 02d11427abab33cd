package retry

import (
	"math/rand/v2"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func TestBudgetFloorAndRatio(t *testing.T) {
	b := NewBudget(0)
	// No calls: the floor alone, three per second.
	for i := range 3 {
		if !b.Retry(t0) {
			t.Fatalf("floor retry %d refused", i)
		}
	}
	if b.Retry(t0.Add(999 * time.Millisecond)) {
		t.Error("a fourth retry in the same second")
	}
	if !b.Retry(t0.Add(time.Second)) {
		t.Error("the next second has its own floor")
	}
	// 50 calls pay for 10 retries by the ratio, then the floor again.
	b = NewBudget(0.2)
	for range 50 {
		b.Call(t0)
	}
	n := 0
	for b.Retry(t0) {
		n++
	}
	if n != 10+3 {
		t.Errorf("%d retries for 50 calls, want 10 by the ratio + 3 by the floor", n)
	}
	// Ten seconds later the calls have left the window.
	later := t0.Add(Window * time.Second)
	n = 0
	for b.Retry(later) {
		n++
	}
	if n != 3 {
		t.Errorf("%d retries once the calls are out of the window, want the floor's 3", n)
	}
}

// refBudget is the slow model: every event with its time, what was earned recomputed by
// replaying them all.
type refBudget struct {
	ratio  float64
	events []refEvent
}

type refEvent struct {
	sec  int64
	kind int // 0 call, 1 retry paid by what calls earned, 2 retry paid by the floor
}

func (m *refBudget) count(kind int, from, to int64) int {
	n := 0
	for _, e := range m.events {
		if e.kind == kind && e.sec >= from && e.sec <= to {
			n++
		}
	}
	return n
}

// earned replays the events: each call earns ratio, each earned retry spends one, and before
// each retry the balance is cut to ratio × the calls of its window.
func (m *refBudget) earned(sec int64) float64 {
	bal := 0.0
	for i, e := range m.events {
		switch e.kind {
		case 0:
			bal += m.ratio
		case 1:
			bal = min(bal, m.ratio*float64(m.countBefore(i, e.sec)))
			bal--
		case 2:
			bal = min(bal, m.ratio*float64(m.countBefore(i, e.sec)))
		}
	}
	return min(bal, m.ratio*float64(m.count(0, sec-Window+1, sec)))
}

// countBefore counts the calls among the first i events in the window ending at sec.
func (m *refBudget) countBefore(i int, sec int64) int {
	n := 0
	for _, e := range m.events[:i] {
		if e.kind == 0 && e.sec > sec-Window && e.sec <= sec {
			n++
		}
	}
	return n
}

func (m *refBudget) retry(now time.Time) bool {
	sec := now.Unix()
	kind := 0
	switch {
	case m.earned(sec) >= 1-1e-6:
		kind = 1
	case m.count(2, sec, sec) < FloorPerSecond:
		kind = 2
	default:
		return false
	}
	m.events = append(m.events, refEvent{sec, kind})
	return true
}

// TestBudgetAgainstReference compares every answer with the model, and checks the storm
// bounds: in total, retries paid by calls never exceed ratio × calls; over every aligned
// window, retries stay within ratio × the calls of that window and the one before, plus the
// floor.
func TestBudgetAgainstReference(t *testing.T) {
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 5))
		ratio := []float64{0.2, 0.1, 0.5, 1}[rng.IntN(4)]
		b, m := NewBudget(ratio), &refBudget{ratio: ratio}
		now := t0
		for step := range 300 {
			now = now.Add(time.Duration(rng.IntN(400)) * time.Millisecond)
			if rng.IntN(3) == 0 {
				b.Call(now)
				m.events = append(m.events, refEvent{now.Unix(), 0})
				continue
			}
			if got, want := b.Retry(now), m.retry(now); got != want {
				t.Fatalf("seed %d step %d: Retry = %v, model %v", seed, step, got, want)
			}
		}
		first, last := t0.Unix(), now.Unix()
		if paid, calls := m.count(1, first, last), m.count(0, first, last); float64(paid) > ratio*float64(calls)+1e-9 {
			t.Fatalf("seed %d: %d retries paid by %d calls", seed, paid, calls)
		}
		for from := first; from+Window-1 <= last; from++ {
			to := from + Window - 1
			calls := m.count(0, from-Window+1, to)
			retries := m.count(1, from, to) + m.count(2, from, to)
			if float64(retries) > ratio*float64(calls)+FloorPerSecond*Window+1e-9 {
				t.Fatalf("seed %d: %d retries for %d calls in [%d, %d]", seed, retries, calls, from-first, to-first)
			}
		}
	}
}
