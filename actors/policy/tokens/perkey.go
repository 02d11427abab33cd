package tokens

import "time"

// PerKey is the client keys' own rate limits (SPEC §18): for each key that has one, a
// request bucket and a token bucket as a provider's, each holding one minute's worth (so a
// key may spend its whole minute at once, then its rate). A call reserves its key's tokens
// as it enters: Reserve says how long it must wait for them, and charges them only when that
// wait is within what the call may wait, so a refused call costs its key nothing. A call
// that then does not run gives them back (Refund); one that ran has its estimate corrected
// from its usage (Correct).
//
// Like Bucket it has no clock and is not safe for concurrent use.
type PerKey struct {
	keys map[string]*keyRate
}

// keyRate is one key's buckets and the rates they were made for.
type keyRate struct {
	rpm, tpm int
	req, tok Bucket
}

// Rate is a key's limits: requests and tokens per minute; 0 is no limit of that kind.
type Rate struct{ RPM, TPM int }

// Limited reports whether the rate limits anything.
func (r Rate) Limited() bool { return r.RPM > 0 || r.TPM > 0 }

// Reserve takes, at now, one request and n tokens from key's buckets of rate r, if they are
// there within limit: it returns how long from now until they are (0: at once) and true, and
// the key's later calls wait behind this one. If they are not there within limit it charges
// nothing, and returns that wait (an honest Retry-After), the bucket that held the call
// longest, and false. A key whose rate changed gets new, full buckets.
func (p *PerKey) Reserve(key string, r Rate, n int, limit time.Duration, now time.Time) (time.Duration, Dimension, bool) {
	if !r.Limited() {
		delete(p.keys, key)
		return 0, None, true
	}
	k := p.keys[key]
	if k == nil || k.rpm != r.RPM || k.tpm != r.TPM {
		if p.keys == nil {
			p.keys = map[string]*keyRate{}
		}
		k = &keyRate{rpm: r.RPM, tpm: r.TPM, req: New(r.RPM, r.RPM), tok: New(r.TPM, r.TPM)}
		p.keys[key] = k
	}
	wr, wt := k.req.Wait(1, now), k.tok.Wait(n, now)
	wait, dim := wr, RPM
	if wt > wr {
		wait, dim = wt, TPM
	}
	if wait > limit {
		return wait, dim, false
	}
	k.req.Take(1, now)
	k.tok.Take(n, now)
	if wait == 0 {
		dim = None
	}
	return wait, dim, true
}

// Refund gives back, at now, what a reservation of n tokens took, for a call that did not
// run (its client left while it waited, or it was refused later).
func (p *PerKey) Refund(key string, n int, now time.Time) {
	if k := p.keys[key]; k != nil {
		k.req.Adjust(-1, now)
		k.tok.Adjust(-n, now)
	}
}

// Correct replaces, at now, the estimate of n tokens a call of key was charged by the actual
// tokens it used; actual ≤ 0 means the backend reported nothing, and the estimate stands.
func (p *PerKey) Correct(key string, n, actual int, now time.Time) {
	if k := p.keys[key]; k != nil && actual > 0 {
		k.tok.Adjust(actual-n, now)
	}
}

// Forget drops key's buckets (a revoked key).
func (p *PerKey) Forget(key string) { delete(p.keys, key) }

// Keys is how many keys have buckets.
func (p *PerKey) Keys() int { return len(p.keys) }
