// Package breaker is a provider's circuit breaker (SPEC §10) as pure code: it opens after
// consecutive provider-down answers or a failure ratio over a window, stays open for a time
// that doubles while probes keep failing, then lets exactly one probe through.
//
// A Breaker has no goroutines, timers or clock: every method takes now, which must not go
// backwards between calls. It is not safe for concurrent use. What counts as a failure is
// the caller's decision: provider-down answers and connection errors are, successes are
// not; rate limits, request errors and cancelled calls are neither and are not reported
// (or reported with Neutral when they ended a probe).
package breaker

import "time"

// Defaults of SPEC §10.
const (
	DefaultFailures = 5
	DefaultRatio    = 0.5
	DefaultOpenFor  = 30 * time.Second
	MaxOpenFor      = 5 * time.Minute
	// MinCalls is the fewest calls in the window for the ratio to count.
	MinCalls = 20
	// Window is how far back the ratio looks, in whole seconds.
	Window = 30
)

// Config is a provider's breaker settings (breaker: {failures, ratio, open_for}). Zero fields
// take their defaults.
type Config struct {
	Failures int           // consecutive failures that open it
	Ratio    float64       // failure ratio over the window that opens it (strictly above)
	OpenFor  time.Duration // first open period; doubles per failed probe up to MaxOpenFor
}

// State is the breaker's position.
type State int

const (
	Closed   State = iota // calls flow
	Open                  // calls are refused until the next probe time
	HalfOpen              // one probe is running (or may start); others are refused
)

func (s State) String() string { return [...]string{"closed", "open", "half_open"}[s] }

// Breaker is one provider's circuit breaker.
type Breaker struct {
	failures int
	ratio    float64
	openFor  time.Duration // base period

	state       State
	consecutive int
	period      time.Duration // the current open period
	until       time.Time     // Open: when the next probe may start
	probing     bool          // HalfOpen: the probe is out
	since       time.Time     // when the state last changed
	slots       [Window]slot
}

// slot counts one clock second of outcomes.
type slot struct {
	sec             int64
	calls, failures int
}

// New returns a closed breaker.
func New(cfg Config) *Breaker {
	b := &Breaker{failures: cfg.Failures, ratio: cfg.Ratio, openFor: cfg.OpenFor}
	if b.failures <= 0 {
		b.failures = DefaultFailures
	}
	if b.ratio <= 0 {
		b.ratio = DefaultRatio
	}
	if b.openFor <= 0 {
		b.openFor = DefaultOpenFor
	}
	b.openFor = min(b.openFor, MaxOpenFor)
	b.period = b.openFor
	for i := range b.slots {
		b.slots[i].sec = -1 << 62
	}
	return b
}

// State returns the position at now: an Open breaker whose period is over reads HalfOpen
// (its probe may start).
func (b *Breaker) State(now time.Time) State {
	if b.state == Open && !now.Before(b.until) {
		return HalfOpen
	}
	return b.state
}

// Since is when the state last changed (zero if it never did).
func (b *Breaker) Since() time.Time { return b.since }

// Allow reports whether a call may start at now. When it is the half-open probe, probe is
// true: the caller must report its outcome (Success, Failure or Neutral), and until it does
// every other call is refused.
func (b *Breaker) Allow(now time.Time) (ok, probe bool) {
	switch b.State(now) {
	case Closed:
		return true, false
	case HalfOpen:
		if b.probing {
			return false, false
		}
		b.state, b.probing = HalfOpen, true
		if b.since.Before(b.until) {
			b.since = b.until
		}
		return true, true
	}
	return false, false
}

// RetryAfter is how long a refused call should wait at now: until the next probe may start
// while open; zero while a probe is out (its result is not known yet) or when closed.
func (b *Breaker) RetryAfter(now time.Time) time.Duration {
	if b.State(now) == Open {
		return b.until.Sub(now)
	}
	return 0
}

// Success records a call that succeeded. A probe's success closes the breaker.
func (b *Breaker) Success(now time.Time, probe bool) {
	if probe && b.state == HalfOpen {
		b.close(now)
		return
	}
	b.consecutive = 0
	b.count(now, false)
}

// Failure records a provider-down answer. A probe's failure reopens the breaker for twice
// the last period (at most MaxOpenFor); in the closed state the failure may open it.
func (b *Breaker) Failure(now time.Time, probe bool) {
	switch {
	case probe && b.state == HalfOpen:
		b.open(now, min(2*b.period, MaxOpenFor))
		return
	case b.state != Closed:
		return // a call started before the breaker opened: already accounted for
	}
	b.consecutive++
	calls, failed := b.count(now, true)
	if b.consecutive >= b.failures || calls >= MinCalls && float64(failed) > b.ratio*float64(calls) {
		b.open(now, b.openFor)
	}
}

// Neutral records that the probe ended with an outcome that says nothing of the provider's
// health (a rate limit, a request error, the client leaving): another probe may start.
func (b *Breaker) Neutral(probe bool) {
	if probe && b.state == HalfOpen {
		b.probing = false
	}
}

// OpenedElsewhere records that another replica's breaker of the same provider opened
// until now+d: this one opens until then, unless it is open at least as long already. A
// probe out here stays out (its outcome is still reported; its success no longer closes
// the breaker, its failure no longer reopens it). The period is at least d, so a later
// failed probe here doubles from the longer of the two. It reports whether anything
// changed.
func (b *Breaker) OpenedElsewhere(now time.Time, d time.Duration) bool {
	until := now.Add(d)
	if d <= 0 || b.state == Open && !b.until.Before(until) {
		return false
	}
	b.state, b.period = Open, max(b.period, min(d, MaxOpenFor))
	b.until, b.since, b.probing = until, now, false
	return true
}

func (b *Breaker) open(now time.Time, period time.Duration) {
	b.state, b.probing, b.period = Open, false, period
	b.until, b.since = now.Add(period), now
}

func (b *Breaker) close(now time.Time) {
	b.state, b.probing, b.consecutive, b.period, b.since = Closed, false, 0, b.openFor, now
	for i := range b.slots {
		b.slots[i] = slot{sec: -1 << 62} // the outcomes that opened it are history
	}
}

// count adds one outcome at now and returns the window's totals.
func (b *Breaker) count(now time.Time, failed bool) (calls, failures int) {
	sec := now.Unix()
	s := &b.slots[((sec%Window)+Window)%Window]
	if s.sec != sec {
		*s = slot{sec: sec}
	}
	s.calls++
	if failed {
		s.failures++
	}
	for i := range b.slots {
		if s := &b.slots[i]; s.sec > sec-Window && s.sec <= sec {
			calls += s.calls
			failures += s.failures
		}
	}
	return calls, failures
}
