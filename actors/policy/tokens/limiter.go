package tokens

import "time"

// Limit configures one limiter: a provider's rate_limit or one key's key_rate_limit. A zero
// RPM or TPM does not limit that dimension; the zero Limit limits nothing.
type Limit struct {
	RPM int // requests per minute
	TPM int // tokens per minute
	// Burst is how many requests the rpm bucket lets start back to back; zero means
	// DefaultBurst(RPM). The tpm bucket always holds DefaultBurst(TPM), ten seconds' worth:
	// a request costing more than that waits for a full bucket and leaves it in debt.
	Burst int
}

// Dimension names the bucket that holds a request back, for the message that tells the
// client why ("rate limit rpm 6: next request in 4s").
type Dimension string

const (
	None Dimension = ""
	RPM  Dimension = "rpm"
	TPM  Dimension = "tpm"
)

// Limiter is a request bucket and a token bucket consulted together: a request starts when
// both have room. The zero Limiter limits nothing.
type Limiter struct {
	rpm, tpm Bucket
}

// NewLimiter returns the limiter of l, full.
func NewLimiter(l Limit) Limiter {
	return Limiter{rpm: New(l.RPM, l.Burst), tpm: New(l.TPM, 0)}
}

// Limited reports whether either dimension limits.
func (l *Limiter) Limited() bool { return l.rpm.Limited() || l.tpm.Limited() }

// Wait is how long from now until a request estimated at tokens may start (zero: now), and
// the dimension that holds it longest (None when it may start).
func (l *Limiter) Wait(tokens int, now time.Time) (time.Duration, Dimension) {
	wr := l.rpm.Wait(1, now)
	wt := l.tpm.Wait(tokens, now)
	switch {
	case wr == 0 && wt == 0:
		return 0, None
	case wt > wr:
		return wt, TPM
	}
	return wr, RPM
}

// Allow reports whether a request estimated at tokens may start at now.
func (l *Limiter) Allow(tokens int, now time.Time) bool {
	return l.rpm.Allow(1, now) && l.tpm.Allow(tokens, now)
}

// Take charges one request estimated at tokens at now.
func (l *Limiter) Take(tokens int, now time.Time) {
	l.rpm.Take(1, now)
	l.tpm.Take(tokens, now)
}

// Fits reports whether a full limiter could let through starts requests adding up to tokens,
// back to back, and then one more estimated at next: whether that one can ever follow them
// before another charge is made. The simulation of a queue uses it to tell a wait that ends
// from one that only another start can change.
func (l *Limiter) Fits(starts, tokens, next int) bool {
	return l.rpm.Fits(starts, 1) && l.tpm.Fits(tokens, next)
}

// Drain empties both buckets at now (see Bucket.Drain).
func (l *Limiter) Drain(now time.Time) {
	l.rpm.Drain(now)
	l.tpm.Drain(now)
}

// Correct replaces a request's estimated charge by what the backend reported it used
// (prompt plus completion tokens); actual ≤ 0 means the backend reported nothing, and the
// estimate stands.
func (l *Limiter) Correct(estimated, actual int, now time.Time) {
	if actual <= 0 {
		return
	}
	l.tpm.Adjust(actual-estimated, now)
}

// Levels are a limiter's buckets as /admin/state shows them: tokens available now and the
// capacity, per dimension; zero capacity means that dimension is not limited.
type Levels struct {
	RPM         int `json:"rpm_available"`
	RPMCapacity int `json:"rpm_capacity"`
	TPM         int `json:"tpm_available"`
	TPMCapacity int `json:"tpm_capacity"`
}

// Levels describes the buckets at now.
func (l *Limiter) Levels(now time.Time) Levels {
	return Levels{RPM: l.rpm.Level(now), RPMCapacity: l.rpm.Capacity(),
		TPM: l.tpm.Level(now), TPMCapacity: l.tpm.Capacity()}
}

// DefaultOutputEstimate is the completion tokens Estimate assumes for a request that sets no
// output cap. The real figure corrects the charge once the backend reports usage.
const DefaultOutputEstimate = 1024

// Estimate is what a request is charged before it runs: its prompt tokens plus its output cap
// (DefaultOutputEstimate when it set none), capped at limit when limit > 0 (the model's context
// window, when known: no call can use more).
func Estimate(promptTokens, maxOutput, limit int) int {
	out := maxOutput
	if out <= 0 {
		out = DefaultOutputEstimate
	}
	n := max(promptTokens, 0) + out
	if limit > 0 {
		n = min(n, limit)
	}
	return n
}
