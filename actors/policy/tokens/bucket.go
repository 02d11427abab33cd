// Package tokens is the rate limiting of SPEC §10 as pure code: token buckets for requests
// per minute (rpm) and tokens per minute (tpm), consulted by admission so that a request waits
// in its queue for its tokens and is never sent to be refused, and able to say when n tokens
// will be there, for an honest Retry-After.
//
// A bucket has no goroutines, timers or clock: every method takes now, which must not go
// backwards between calls. It is not safe for concurrent use. The zero Bucket is unlimited.
//
// # Buckets and bursts
//
// A Bucket of rate R per minute and capacity C holds at most C tokens, refills continuously
// at R per minute and starts full. Over any minute it lets at most R+C tokens through, so C
// is the burst a backend must tolerate. The default capacity is ten seconds' worth (R/6, at
// least 1): for rpm 60 that is 10 requests back to back, then one per second; for rpm 6 one
// request, then one every 10 s. Backends that enforce their per-minute limit over a full
// minute take a larger burst (rate_limit.burst), those that enforce it per second a smaller
// one.
//
// # Charges larger than the bucket, and corrections
//
// A request whose estimated cost n exceeds the capacity could never find n tokens. It is
// allowed when the bucket is full, and its whole cost is still charged: the bucket goes into
// debt and later requests wait until it is repaid, so the average rate never exceeds R. The
// estimate made before a call (prompt plus max_tokens) is corrected from the usage the backend
// reports with Adjust: a refund when the call used less (never above full), more debt when it
// used more.
//
// It is kept, like actors/policy's rpm bucket, as a theoretical arrival time (GCRA) in integer
// nanoseconds: tat − now is the refill time still owed, so the tokens available at now are
// C − (tat − now)·R/minute. Refills never drift and nothing has to be topped up as time passes.
package tokens

import (
	"math"
	"time"
)

// maxCharge bounds one charge so n·minute cannot overflow an int64: 2^27 tokens (134 million)
// is far beyond any request.
const maxCharge = 1 << 27

// Bucket is one rate limit. The zero value never limits.
type Bucket struct {
	perMinute int
	capacity  int
	// tat − now, when positive, is the refill time owed for the tokens taken; at or before
	// now the bucket is full. Zero: never used (full).
	tat time.Time
}

// DefaultBurst is the capacity a rate gets when none is configured: ten seconds' worth, at
// least 1.
func DefaultBurst(perMinute int) int { return max(1, perMinute/6) }

// New returns a bucket of perMinute tokens per minute holding at most burst (zero or
// negative: DefaultBurst). perMinute ≤ 0 is the unlimited bucket.
func New(perMinute, burst int) Bucket {
	if perMinute <= 0 {
		return Bucket{}
	}
	if burst <= 0 {
		burst = DefaultBurst(perMinute)
	}
	return Bucket{perMinute: perMinute, capacity: min(burst, maxCharge)}
}

// Limited reports whether the bucket limits anything.
func (b *Bucket) Limited() bool { return b.perMinute > 0 }

// Capacity is the most tokens the bucket holds; 0 when unlimited.
func (b *Bucket) Capacity() int { return b.capacity }

// cost is the refill time of n tokens: n minutes / perMinute, rounded up so that a bucket
// never refills faster than its rate.
func (b *Bucket) cost(n int) time.Duration {
	n = min(max(n, 0), maxCharge)
	num := int64(n) * int64(time.Minute)
	d := num / int64(b.perMinute)
	if num%int64(b.perMinute) != 0 {
		d++
	}
	return time.Duration(d)
}

// debt is how far tat is past now: the refill time still owed.
func (b *Bucket) debt(now time.Time) time.Duration {
	if b.tat.IsZero() || !b.tat.After(now) {
		return 0
	}
	return b.tat.Sub(now)
}

// need is the tokens a charge of n must find: n, but never more than a full bucket.
func (b *Bucket) need(n int) int { return min(max(n, 0), b.capacity) }

// Allow reports whether a request costing n tokens may start at now.
func (b *Bucket) Allow(n int, now time.Time) bool { return b.Wait(n, now) == 0 }

// Wait is how long from now until a request costing n tokens may start, if nothing else is
// taken meanwhile: zero when it may start now. It is the honest Retry-After of a request held
// back by this bucket alone.
func (b *Bucket) Wait(n int, now time.Time) time.Duration {
	if b.perMinute <= 0 {
		return 0
	}
	// Allowed when the debt, after taking need(n), fits in the capacity's refill time.
	over := b.debt(now) + b.cost(b.need(n)) - b.cost(b.capacity)
	return max(over, 0)
}

// Take charges n tokens at now (all of them, even above the capacity: see the package doc).
// The caller checked Allow; Take on a bucket that does not allow it still charges, which is
// how a call the limiter did not gate (a retry keeping its lane) is accounted.
func (b *Bucket) Take(n int, now time.Time) {
	if b.perMinute <= 0 || n <= 0 {
		return
	}
	base := now
	if b.tat.After(now) {
		base = b.tat
	}
	b.tat = base.Add(b.cost(n))
}

// Adjust corrects an earlier charge by delta tokens at now: negative gives tokens back
// (never beyond a full bucket), positive charges more.
func (b *Bucket) Adjust(delta int, now time.Time) {
	switch {
	case b.perMinute <= 0 || delta == 0:
	case delta > 0:
		b.Take(delta, now)
	default:
		refund := b.cost(-delta)
		if d := b.debt(now); refund >= d {
			b.tat = now // full
		} else {
			b.tat = b.tat.Add(-refund)
		}
	}
}

// Level is the tokens available at now (negative while in debt beyond the capacity), for
// /admin/state. An unlimited bucket reports 0.
func (b *Bucket) Level(now time.Time) int {
	if b.perMinute <= 0 {
		return 0
	}
	// Tokens owed, rounded up: a bucket short of a token by a nanosecond has not got it. In
	// floating point: debt × rate can overflow an int64, and this is only for display.
	owed := math.Ceil(float64(b.debt(now)) * float64(b.perMinute) / float64(time.Minute))
	return b.capacity - int(min(owed, float64(math.MaxInt32)))
}
