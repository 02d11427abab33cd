// Package capacity learns how many lanes a backend really takes (SPEC §11) as pure
// code: configured lanes are a ceiling, and the effective count follows what the backend
// itself reports while refusing.
//
// # The rule
//
//   - A refusal that states the backend's concurrency limit or its slots in use sets the
//     effective lanes to that number at once (clamped to [1, configured]).
//   - Any other rate limit while every effective lane was busy halves them (at least 1). The
//     calls that were already running when lanes were cut saw the old, higher count: their
//     refusals are the same news and do not cut again.
//   - They grow back by one after every Probe successful calls made while all effective lanes
//     were busy, never above the configured lanes. A remaining-requests of 0 from the backend
//     holds them (no growth) until it reports more again or its reset time passes.
//   - Disabled (adaptive_lanes: false), the effective lanes are the configured ones, always.
//
// Growth alone would make a backend with a steady hidden limit C oscillate between C and C+1:
// every Probe calls one probe above C, refused, back to C. So the level a refusal came from
// is remembered: the highest level known to work is the ceiling, and each refused probe
// above it doubles the successes the next one needs (up to 8 × Probe); a probe that holds for
// Probe calls raises the ceiling and resets the doubling. Under a steady signal the lanes
// therefore settle, and a raised hidden limit is still found within a bounded number of
// calls.
//
// A Lanes has no goroutines, timers or clock: every method takes now, which must not go
// backwards. It is not safe for concurrent use. Methods that change the count return the
// Change, so the owner can log it with its reason and publish it.
package capacity

import "time"

// DefaultProbe is lanes_probe's default.
const DefaultProbe = 20

// maxDamping caps the doubling of the successes a probe above the ceiling needs: 2^3 = 8.
const maxDamping = 3

// Config is one scope's learning (a provider's lanes, or a model's model lanes).
type Config struct {
	Lanes    int  // configured lanes: the ceiling; at least 1
	Probe    int  // successes with every lane busy before one more lane; 0 → DefaultProbe
	Disabled bool // adaptive_lanes: false
}

// Reason says why the effective lanes have their value.
type Reason string

const (
	Configured  Reason = "configured"   // never changed
	StatedLimit Reason = "stated_limit" // the backend said how many it takes
	RateLimited Reason = "rate_limited" // an unexplained rate limit while full: halved
	Probed      Reason = "probe"        // enough successes while full: one more
	Shared      Reason = "shared"       // another replica learned it (SPEC §17)
)

// Change is one change of the effective lanes, for the log line and the metrics.
type Change struct {
	From, To int
	Reason   Reason
	At       time.Time
}

// Lanes is the learned capacity of one scope.
type Lanes struct {
	lanes, probe int
	disabled     bool

	eff       int
	ceiling   int // the highest level known to work; probing above it is damped
	misses    int // probes refused above the ceiling since it last rose
	successes int // successes while full since the last change
	lastCut   time.Time
	held      bool
	holdUntil time.Time // zero: held until the backend reports remaining > 0

	reason Reason
	since  time.Time
}

// New returns the learning of cfg at now, starting at the configured lanes.
func New(cfg Config, now time.Time) *Lanes {
	l := &Lanes{lanes: max(cfg.Lanes, 1), probe: cfg.Probe, disabled: cfg.Disabled}
	if l.probe <= 0 {
		l.probe = DefaultProbe
	}
	l.eff, l.ceiling, l.reason, l.since = l.lanes, l.lanes, Configured, now
	return l
}

// Effective is the lanes calls may use now.
func (l *Lanes) Effective() int { return l.eff }

// Snapshot is the state /admin/state shows.
type Snapshot struct {
	Effective int
	Lanes     int
	Reason    Reason
	Since     time.Time
	Held      bool // growth held by a remaining-requests of 0
}

// Snapshot describes the learning at now.
func (l *Lanes) Snapshot(now time.Time) Snapshot {
	return Snapshot{Effective: l.eff, Lanes: l.lanes, Reason: l.reason, Since: l.since, Held: l.isHeld(now)}
}

func (l *Lanes) set(to int, why Reason, now time.Time) (Change, bool) {
	from := l.eff
	l.successes = 0
	if to == from {
		return Change{}, false
	}
	l.eff, l.reason, l.since = to, why, now
	return Change{From: from, To: to, Reason: why, At: now}, true
}

// Stated records a refusal in which the backend stated its limit (or its slots in use) as n.
func (l *Lanes) Stated(n int, now time.Time) (Change, bool) {
	if l.disabled {
		return Change{}, false
	}
	n = min(max(n, 1), l.lanes)
	if l.eff > l.ceiling || n < l.ceiling {
		l.misses++ // refused above what was known to work
	}
	l.ceiling, l.lastCut = n, now
	return l.set(n, StatedLimit, now)
}

// RateLimited records a rate limit that stated no limit, refusing a call started at started
// while running calls (that one included) were running.
func (l *Lanes) RateLimited(running int, started, now time.Time) (Change, bool) {
	if l.disabled || running < l.eff || started.Before(l.lastCut) {
		return Change{}, false
	}
	to := max(1, l.eff/2)
	l.ceiling = max(to, min(l.ceiling, l.eff-1))
	l.misses++
	l.lastCut = now
	return l.set(to, RateLimited, now)
}

// Succeeded records a successful call; busy reports that every effective lane was busy
// while it ran (the owner's running count had reached Effective).
func (l *Lanes) Succeeded(busy bool, now time.Time) (Change, bool) {
	if l.disabled || !busy || l.eff >= l.lanes || l.isHeld(now) {
		return Change{}, false
	}
	l.successes++
	need := l.probe
	if l.eff >= l.ceiling {
		need = l.probe << min(l.misses, maxDamping)
	}
	if l.successes < need {
		return Change{}, false
	}
	if l.eff > l.ceiling { // the probe level held: it is known to work now
		l.ceiling, l.misses = l.eff, 0
	}
	return l.set(l.eff+1, Probed, now)
}

// Adopt takes on n lanes that another replica sharing the backend learned, clamped to
// 1..the configured lanes, as the level known to work: the learning goes on from there (a
// cut holds off halving for calls started before it, as Stated's does). Disabled learning
// adopts nothing.
func (l *Lanes) Adopt(n int, now time.Time) (Change, bool) {
	if l.disabled {
		return Change{}, false
	}
	n = min(max(n, 1), l.lanes)
	if n == l.eff {
		return Change{}, false
	}
	if n < l.eff {
		l.lastCut = now
	}
	l.ceiling, l.misses = n, 0
	return l.set(n, Shared, now)
}

// Remaining records the backend's remaining-requests count (x-ratelimit-remaining-requests,
// anthropic-ratelimit-requests-remaining) and the time until that bucket resets (zero:
// unknown). Zero holds growth until the reset passes, or, with no reset, until the backend
// reports more than zero.
func (l *Lanes) Remaining(remaining int, reset time.Duration, now time.Time) {
	if remaining > 0 {
		l.held = false
		return
	}
	l.held = true
	l.holdUntil = time.Time{}
	if reset > 0 {
		l.holdUntil = now.Add(reset)
	}
}

func (l *Lanes) isHeld(now time.Time) bool {
	return l.held && (l.holdUntil.IsZero() || now.Before(l.holdUntil))
}
