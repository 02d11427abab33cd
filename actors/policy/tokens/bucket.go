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
// It is kept as a theoretical arrival time (GCRA) with the fraction of a nanosecond carried
// exactly: tat − now, plus rem/rate, is the refill time still owed. Charges of any size add up
// without rounding (three charges of one token at rpm 18 owe exactly ten seconds), so a
// burst of C requests always fits a bucket of capacity C, and nothing has to be topped up as
// time passes.
package tokens

import "time"

// minute is the unit of a rate, in nanoseconds.
const minute = int64(time.Minute)

// Bounds that keep the arithmetic within int64: one charge counts at most maxCharge tokens
// (16 million, far beyond any request), and a bucket never owes more than maxOwed tokens,
// however many charges it was given without being consulted.
const (
	maxCharge = 1 << 24
	maxOwed   = 1 << 26
)

// Bucket is one rate limit. The zero value never limits.
//
// The refill still owed at now is U/rate nanoseconds, with U = (tat − now)·rate + rem in
// units of a token·minute per rate (a token is minute units; each nanosecond repays rate of
// them). tat ≤ now with rem 0, or tat < now, is a full bucket.
type Bucket struct {
	rate     int64 // tokens per minute
	capacity int64
	tat      time.Time
	rem      int64 // in [0, rate)
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
	return Bucket{rate: int64(perMinute), capacity: int64(min(burst, maxCharge))}
}

// Limited reports whether the bucket limits anything.
func (b *Bucket) Limited() bool { return b.rate > 0 }

// Capacity is the most tokens the bucket holds; 0 when unlimited.
func (b *Bucket) Capacity() int { return int(b.capacity) }

// owed returns d = tat − now and rem when the bucket owes anything at now; full otherwise.
func (b *Bucket) owed(now time.Time) (d, rem int64, full bool) {
	if b.tat.IsZero() {
		return 0, 0, true
	}
	d = int64(b.tat.Sub(now))
	if d < 0 || d == 0 && b.rem == 0 {
		return 0, 0, true
	}
	return d, b.rem, false
}

// need is the tokens a charge of n must find: n, but never more than a full bucket.
func (b *Bucket) need(n int) int64 { return min(max(int64(n), 0), b.capacity) }

// Allow reports whether a request costing n tokens may start at now.
func (b *Bucket) Allow(n int, now time.Time) bool { return b.Wait(n, now) == 0 }

// Wait is how long from now until a request costing n tokens may start, if nothing else is
// taken meanwhile: zero when it may start now. It is the honest Retry-After of a request held
// back by this bucket alone.
func (b *Bucket) Wait(n int, now time.Time) time.Duration {
	if b.rate <= 0 {
		return 0
	}
	d, rem, full := b.owed(now)
	if full {
		return 0
	}
	// Allowed once U + need·minute ≤ capacity·minute, that is d·rate ≤ x.
	x := (b.capacity-b.need(n))*minute - rem
	if x < 0 {
		return time.Duration(d + 1) // only a full bucket will do: one nanosecond past tat
	}
	return time.Duration(max(d-x/b.rate, 0))
}

// Take charges n tokens at now (all of them, even above the capacity: see the package doc).
// The caller checked Allow; Take on a bucket that does not allow it still charges, which is
// how a call the limiter did not gate (a retry keeping its lane) is accounted.
func (b *Bucket) Take(n int, now time.Time) {
	if b.rate <= 0 || n <= 0 {
		return
	}
	if _, _, full := b.owed(now); full {
		b.tat, b.rem = now, 0
	}
	add := int64(min(n, maxCharge))*minute + b.rem
	b.tat = b.tat.Add(time.Duration(add / b.rate))
	b.rem = add % b.rate
	if limit := maxOwed * minute / b.rate; int64(b.tat.Sub(now)) > limit {
		b.tat, b.rem = now.Add(time.Duration(limit)), 0
	}
}

// Adjust corrects an earlier charge by delta tokens at now: negative gives tokens back
// (never beyond a full bucket), positive charges more.
func (b *Bucket) Adjust(delta int, now time.Time) {
	switch {
	case b.rate <= 0 || delta == 0:
	case delta > 0:
		b.Take(delta, now)
	default:
		d, rem, full := b.owed(now)
		if full {
			return
		}
		u := d*b.rate + rem - int64(min(-delta, maxOwed))*minute
		if u <= 0 {
			b.tat, b.rem = now, 0
			return
		}
		b.tat, b.rem = now.Add(time.Duration(u/b.rate)), u%b.rate
	}
}

// Drain empties the bucket at now, as if its whole capacity had just been taken. A provider
// rebuilt after a crash starts with drained limiters, because the starts its lost state had
// counted may have been recent.
func (b *Bucket) Drain(now time.Time) {
	if b.rate <= 0 {
		return
	}
	b.tat, b.rem = now, 0
	b.Take(int(b.capacity), now)
}

// Fits reports whether a full bucket could let through, back to back, charges adding up to
// taken tokens and then a request costing n: whether that request can ever follow them
// without another charge being made first.
func (b *Bucket) Fits(taken, n int) bool {
	return b.rate <= 0 || int64(max(taken, 0))+b.need(n) <= b.capacity
}

// Level is the tokens available at now (negative while in debt beyond the capacity), for
// /admin/state. An unlimited bucket reports 0.
func (b *Bucket) Level(now time.Time) int {
	if b.rate <= 0 {
		return 0
	}
	d, rem, full := b.owed(now)
	if full {
		return int(b.capacity)
	}
	u := d*b.rate + rem               // at most maxOwed·minute
	owed := (u + minute - 1) / minute // tokens owed, rounded up: short by a fraction is short
	return int(b.capacity - owed)
}
