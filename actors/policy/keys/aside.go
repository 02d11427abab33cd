package keys

import (
	"net/http"
	"time"
)

// A key the backend refused (401/403) is set aside (SPEC §10): for every model when the
// backend refused the key itself, or only for the model it asked for when the key may not
// use that model. A set-aside key or pair is not picked until its re-probe time, MaxCooldown
// after the refusal; then it is Ready for one call, the probe (Began). The probe's success
// restores it; another refusal sets it aside again for twice the last wait, up to
// MaxSetAside; any other ending lets the next call probe. Refusals of calls that were not
// the probe (they started before it was set aside) change nothing: the key's verdict is the
// probe's.

// MaxSetAside is the longest wait before a set-aside key or pair is probed again.
const MaxSetAside = time.Hour

// Scope is what a refusal sets aside.
type Scope int

const (
	WholeKey Scope = iota // the key, for every model
	OneModel              // the key for one model only
)

func (s Scope) String() string {
	if s == OneModel {
		return "model"
	}
	return "key"
}

// ScopeOf is the scope of a refusal the backend answered with HTTP status: a 403 refuses the
// model (the key authenticated but may not use it) unless keyInvalid, the backend's own word
// that the key itself is invalid or disabled; a 401 and everything else (a refusal inside a
// 200, a 400 naming a bad key, a CLI's login error) refuse the key.
func ScopeOf(status int, keyInvalid bool) Scope {
	if status == http.StatusForbidden && !keyInvalid {
		return OneModel
	}
	return WholeKey
}

// aside is one set-aside key or pair.
type aside struct {
	reason  string        // what the backend said, for /admin/state; never a secret
	since   time.Time     // the first refusal
	until   time.Time     // the re-probe time
	wait    time.Duration // what until was set to after the last refusal; doubles
	probing bool          // the probe call is out
}

// holds reports whether a keeps its key or pair from being picked at now. A nil a holds
// nothing.
func (a *aside) holds(now time.Time) bool {
	return a != nil && (a.probing || now.Before(a.until))
}

// pairOf is the set-aside of key i for model m, or nil (always for m < 0).
func (r *Ring) pairOf(i, m int) *aside {
	if m < 0 {
		return nil
	}
	return r.pairs[pair{i, m}]
}

// Change is what a Refused, ProbeSucceeded or ProbeEnded did, for the owner's log and
// metrics: a key or pair newly set aside (Scope; Until its re-probe), set aside again after
// its probe failed (Again), and what it restored.
type Change struct {
	SetAside      bool
	Again         bool
	Scope         Scope
	Until         time.Time
	RestoredKey   bool // the key, for every model
	RestoredModel bool // the pair of the key and the call's model
}

// Refused records that the backend refused key i for model m at now, with scope (ScopeOf)
// and reason (its message, no secret). probe says the call was the probe Began named. A
// refusal for the model from the probe of a key set aside whole shows that the key itself
// is accepted again: the key is restored and the pair set aside.
func (r *Ring) Refused(i, m int, scope Scope, reason string, probe bool, now time.Time) Change {
	ch := Change{Scope: scope}
	if scope == OneModel && m < 0 {
		ch.Scope = WholeKey
	}
	if ch.Scope == OneModel {
		if a := r.aside[i]; probe && a != nil && a.probing {
			r.aside[i], ch.RestoredKey = nil, true
		}
		p := pair{i, m}
		r.pairs[p], ch.SetAside, ch.Again = r.setAside(r.pairs[p], reason, probe, now)
		ch.Until = r.pairs[p].until
		return ch
	}
	if pa := r.pairOf(i, m); probe && pa != nil && pa.probing {
		pa.probing = false // its key is refused now: the pair waits for the key's probe
	}
	r.aside[i], ch.SetAside, ch.Again = r.setAside(r.aside[i], reason, probe, now)
	ch.Until = r.aside[i].until
	return ch
}

// setAside is a after one more refusal at now: new when nil (fresh; re-probed after
// MaxCooldown), waiting twice as long when the refusal was its probe's (again), else as it
// was.
func (r *Ring) setAside(a *aside, reason string, probe bool, now time.Time) (_ *aside, fresh, again bool) {
	switch {
	case a == nil:
		return &aside{reason: reason, since: now, until: now.Add(r.maxCooldown), wait: r.maxCooldown}, true, false
	case probe && a.probing:
		a.wait = min(2*a.wait, max(MaxSetAside, r.maxCooldown))
		a.until, a.probing, a.reason = now.Add(a.wait), false, reason
		return a, false, true
	}
	return a, false, false
}

// Began records that a call for model m starts on key i at now, and reports whether it is
// the probe of the key or of the pair: it is when one of them is set aside and its re-probe
// is due (then nothing else is picked until the probe ends).
func (r *Ring) Began(i, m int, now time.Time) (probe bool) {
	for _, a := range []*aside{r.aside[i], r.pairOf(i, m)} {
		if a != nil && !a.probing && !now.Before(a.until) {
			a.probing, probe = true, true
		}
	}
	return probe
}

// ProbeSucceeded records that the probe on key i for model m was answered: whatever it
// probed (the key, the pair or both) is restored.
func (r *Ring) ProbeSucceeded(i, m int) Change {
	var ch Change
	if a := r.aside[i]; a != nil && a.probing {
		r.aside[i], ch.RestoredKey = nil, true
	}
	if a := r.pairOf(i, m); a != nil && a.probing {
		delete(r.pairs, pair{i, m})
		ch.RestoredModel = true
	}
	return ch
}

// ProbeEnded records that the probe on key i for model m ended saying nothing of the key (a
// cancelled call, a rate limit, a backend error): the next call probes again.
func (r *Ring) ProbeEnded(i, m int) {
	for _, a := range []*aside{r.aside[i], r.pairOf(i, m)} {
		if a != nil {
			a.probing = false
		}
	}
}

// AllRefused reports whether every key is set aside for model m at now, none due for its
// re-probe and none with its probe out (502 upstream_auth_failed: waiting in the queue
// cannot help). While a probe is out, calls wait for its verdict.
func (r *Ring) AllRefused(m int, now time.Time) bool {
	for i := range r.until {
		if r.State(i, m, now) != SetAside || r.probing(i, m) {
			return false
		}
	}
	return true
}

// probing reports whether a probe of key i, or of the key for model m, is out.
func (r *Ring) probing(i, m int) bool {
	a, pa := r.aside[i], r.pairOf(i, m)
	return a != nil && a.probing || pa != nil && pa.probing
}

// AnySetAside reports whether some key or pair is set aside.
func (r *Ring) AnySetAside() bool {
	for _, a := range r.aside {
		if a != nil {
			return true
		}
	}
	return len(r.pairs) > 0
}

// HasPairs reports whether some key is set aside for one model only: the ring's answer then
// depends on the model asking.
func (r *Ring) HasPairs() bool { return len(r.pairs) > 0 }

// SetAsides counts what is set aside: keys for every model, and (key, model) pairs.
func (r *Ring) SetAsides() (whole, pairs int) {
	for _, a := range r.aside {
		if a != nil {
			whole++
		}
	}
	return whole, len(r.pairs)
}

// AsideState is a set-aside key or pair as /admin/state shows it.
type AsideState struct {
	Reason    string    `json:"reason"`
	Since     time.Time `json:"since"`
	ReprobeAt time.Time `json:"reprobe_at"`
	// ReprobeInMs is the time left until ReprobeAt, rounded up; 0 when the re-probe is due
	// or out (Probing).
	ReprobeInMs int64 `json:"reprobe_in_ms"`
	// WaitMs is the wait that set ReprobeAt: MaxCooldown, doubled after each failed probe.
	WaitMs  int64 `json:"wait_ms"`
	Probing bool  `json:"probing"`
}

// ModelAside is a key set aside for one model, named by the ring's owner.
type ModelAside struct {
	Model int    `json:"-"`
	Name  string `json:"model"`
	AsideState
}

func (a *aside) state(now time.Time) *AsideState {
	st := &AsideState{Reason: a.reason, Since: a.since, ReprobeAt: a.until, WaitMs: ceilMs(a.wait), Probing: a.probing}
	if left := a.until.Sub(now); left > 0 && !a.probing {
		st.ReprobeInMs = ceilMs(left)
	}
	return st
}
