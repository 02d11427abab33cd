package policy

import "time"

// bucket is a token bucket kept as a generic cell rate algorithm: tat is the theoretical
// arrival time of the next request if requests came exactly one interval apart. A request
// conforms when now ≥ tat − tolerance, where tolerance is (burst−1) intervals; taking a
// token moves tat one interval past max(tat, now). This is exactly a bucket of burst tokens
// refilled one per interval, without a token count that must be topped up as time passes.
type bucket struct {
	interval  time.Duration // time per token; 0 means no rate limit
	tolerance time.Duration // (burst-1) * interval
	tat       time.Time     // zero: never used, the bucket is full
}

func newBucket(rpm, burst int) bucket {
	if rpm <= 0 {
		return bucket{}
	}
	if burst <= 0 {
		burst = max(1, rpm/6)
	}
	iv := time.Minute / time.Duration(rpm)
	if iv <= 0 {
		iv = 1 // above 60e9 requests per minute; a nanosecond per token is close enough
	}
	return bucket{interval: iv, tolerance: time.Duration(burst-1) * iv}
}

func (b *bucket) limited() bool { return b.interval > 0 }

// ready reports whether a token is available at now.
func (b *bucket) ready(now time.Time) bool {
	return b.interval == 0 || b.tat.IsZero() || !now.Before(b.tat.Add(-b.tolerance))
}

// take consumes a token at now; the caller checked ready.
func (b *bucket) take(now time.Time) {
	if b.interval == 0 {
		return
	}
	if b.tat.Before(now) {
		b.tat = now
	}
	b.tat = b.tat.Add(b.interval)
}

// nextToken is the earliest time ready can be true; zero when it already is from the start.
func (b *bucket) nextToken() time.Time {
	if b.interval == 0 || b.tat.IsZero() {
		return time.Time{}
	}
	return b.tat.Add(-b.tolerance)
}

// waitFor estimates how long from now until n more tokens have been available, that is
// until the n-th request from now could start if lanes did not hold it back.
func (b *bucket) waitFor(n int, now time.Time) time.Duration {
	if b.interval == 0 || n <= 0 {
		return 0
	}
	base := b.tat
	if base.Before(now) {
		base = now
	}
	// After n takes tat would be base + n*interval; the n-th take itself needed
	// base + (n-1)*interval - tolerance.
	d := base.Add(time.Duration(n-1)*b.interval - b.tolerance).Sub(now)
	return max(d, 0)
}

// tokens is how many requests could start back to back at now, at most limit (which must
// be positive): the bucket's whole burst when it is full, 0 when the next token is still
// to come. Without a rate limit it is limit.
func (b *bucket) tokens(now time.Time, limit int) int {
	if b.interval == 0 || b.tat.IsZero() {
		if b.interval == 0 {
			return limit
		}
		return min(limit, int(b.tolerance/b.interval)+1)
	}
	base := b.tat
	if base.Before(now) {
		base = now
	}
	// The k-th take from now (k = 0, 1, ...) conforms while base + k*interval - tolerance ≤ now.
	slack := now.Sub(base) + b.tolerance
	if slack < 0 {
		return 0
	}
	return min(limit, int(slack/b.interval)+1)
}

// drain empties the bucket at now: its next token comes one interval later. A provider
// rebuilt after a crash starts with a drained limiter, because the starts its lost state
// had counted may have been recent.
func (b *bucket) drain(now time.Time) {
	if b.interval == 0 {
		return
	}
	b.tat = now.Add(b.interval + b.tolerance)
}

// burst is the bucket's capacity.
func (b *bucket) burst() int { return int(b.tolerance/b.interval) + 1 }

// nextIncrease is when the bucket, holding have tokens at now (tokens(now, ...)), holds one
// more: the k-th token from now is there once base + k*interval - tolerance ≤ t. A full
// bucket never holds more; the caller checks have < burst.
func (b *bucket) nextIncrease(now time.Time, have int) time.Time {
	base := b.tat
	if base.Before(now) {
		base = now
	}
	return base.Add(time.Duration(have)*b.interval - b.tolerance)
}
