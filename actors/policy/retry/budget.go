package retry

import (
	"math"
	"time"
)

// Budget defaults of SPEC §10.
const (
	DefaultRatio = 0.2 // retry_budget
	// FloorPerSecond retries are allowed each second whatever the ratio, so a provider with
	// little traffic can still retry.
	FloorPerSecond = 3
	// Window is how far back the ratio looks, in whole seconds.
	Window = 10
)

// Budget is one provider's retry budget. Every first attempt earns Ratio of a retry; a retry
// spends one earned retry when there is one, else it is paid by the floor, FloorPerSecond
// retries in each clock second, else it is refused. What is earned does not keep: it is
// never more than Ratio times the first attempts of the last Window seconds, so a quiet
// provider cannot bank retries for a later storm. Hence over any stretch of time with C
// first attempts and S seconds, at most Ratio·C + FloorPerSecond·S retries are made, plus what
// the Window before it had earned and not spent: with the defaults, at most 1.2 attempts per
// call plus 3 a second.
//
// Seconds are aligned to the clock (now.Unix()); the window is the current second and the
// Window−1 before it. The zero Budget is not usable: call NewBudget.
type Budget struct {
	ratio  int64 // millionths of a retry earned per first attempt
	earned int64 // millionths of retries earned and not spent
	slots  [Window]slot
}

// unit is one retry in the budget's fixed-point arithmetic: sums of a ratio such as 0.2 must
// not drift below a whole retry, as they would in floating point.
const unit = 1_000_000

// slot counts one second.
type slot struct {
	sec       int64 // the Unix second it counts; a slot of another second is stale
	calls     int
	floorPaid int
}

// NewBudget returns a budget allowing ratio (zero or negative: DefaultRatio) of the calls as
// retries, plus the floor.
func NewBudget(ratio float64) *Budget {
	if ratio <= 0 {
		ratio = DefaultRatio
	}
	b := &Budget{ratio: max(1, int64(math.Round(ratio*unit)))}
	for i := range b.slots {
		b.slots[i].sec = -1 << 62
	}
	return b
}

// at returns the slot of now's second, emptied if it held an older second.
func (b *Budget) at(now time.Time) *slot {
	sec := now.Unix()
	s := &b.slots[((sec%Window)+Window)%Window]
	if s.sec != sec {
		*s = slot{sec: sec}
	}
	return s
}

// expire caps what was earned at what the window's first attempts earn.
func (b *Budget) expire(now time.Time) {
	sec, calls := now.Unix(), 0
	for i := range b.slots {
		if s := &b.slots[i]; s.sec > sec-Window && s.sec <= sec {
			calls += s.calls
		}
	}
	b.earned = min(b.earned, b.ratio*int64(calls))
}

// Call records a first attempt (not a retry) at now.
func (b *Budget) Call(now time.Time) {
	b.at(now).calls++
	b.earned += b.ratio
}

// Retry asks to spend the budget on one retry at now; it reports whether the retry may be
// made, and records it if so. A refused retry leaves the budget unchanged.
func (b *Budget) Retry(now time.Time) bool {
	b.expire(now)
	s := b.at(now)
	switch {
	case b.earned >= unit:
		b.earned -= unit
	case s.floorPaid < FloorPerSecond:
		s.floorPaid++
	default:
		return false
	}
	return true
}
