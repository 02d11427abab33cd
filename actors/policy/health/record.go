package health

import (
	"errors"
	"fmt"
	"time"

	"github.com/tollgate/tollgate/actors/policy/breaker"
	"github.com/tollgate/tollgate/actors/policy/capacity"
	"github.com/tollgate/tollgate/actors/policy/keys"
	"github.com/tollgate/tollgate/actors/policy/retry"
	"github.com/tollgate/tollgate/providers/llm"
)

// Kind is how an attempt ended, as health sees it.
type Kind int

const (
	// Failed: the attempt failed with Outcome.Err.
	Failed Kind = iota
	// Succeeded: the backend answered.
	Succeeded
	// Neutral: it ended saying nothing of the backend (stopped, cancelled).
	Neutral
	// Settled: its last attempt's failure was recorded already; a key probe it holds ends.
	Settled
	// NotRun: it was handed back before it ran; a breaker probe it holds lets the next go.
	NotRun
)

// Outcome is one attempt's ending and what health needs to know of its call.
type Outcome struct {
	Kind  Kind
	Err   error      // Failed: the attempt's error
	Quota *llm.Quota // Succeeded: the backend's remaining counts; nil when not told
	Model int        // the call's model index
	Key   int        // the key the attempt used
	// Probe: the call is the breaker's half-open probe. KeyProbe: it probes ProbeKey, set
	// aside. StaleKeys: its key is of before a reload and names no key of now.
	Probe, KeyProbe, StaleKeys bool
	ProbeKey                   int
	Busy                       bool      // it took the last lane of its scope when it started
	Started                    time.Time // when it started
	Running                    int       // calls running now in its scope of learned lanes
}

// Effects is what the owner carries out after Record.
type Effects struct {
	// CapacityRefused: the backend refused the call for its stated concurrency; the lanes
	// learned it and the call may wait at the head of its queue again.
	CapacityRefused bool
	// ProbeOver and KeyProbeOver: the call is no longer the breaker's or a key's probe.
	ProbeOver, KeyProbeOver bool
	// SetCap: the start cap changed, to StartCap (see State.StartCap).
	SetCap   bool
	StartCap int
	// Cooled is a key the backend's rate limit made rest; nil when none.
	Cooled *Cooldown
	// Key is what a refusal or a probe changed of a key; nil when nothing.
	Key *KeyChange
	// Recheck is the pool whose waiting calls its keys may no longer serve in time; -1
	// when none.
	Recheck int
	// Lanes is a change of learned lanes; nil when none.
	Lanes *LanesChange
	// Opened: the breaker just opened (for State.RetryAfter); Closed: a probe closed it.
	Opened, Closed bool
}

// Cooldown is a key resting after a rate limit.
type Cooldown struct {
	Pool, Key int
	For       time.Duration
}

// KeyChange is what happened to a set-aside key or pair.
type KeyChange struct {
	Key    int
	Change keys.Change
}

// LanesChange is a scope's learned lanes changing, and the signal that made them.
type LanesChange struct {
	Model  int // the model with keys of its own whose model lanes changed; -1: the provider's
	Change capacity.Change
	Signal string
}

// testHookMidRecord, when set (by a test), runs in the middle of Record, after the copies
// have changed and before they are assigned.
var testHookMidRecord func()

// Record applies how an attempt ended to the provider's health and returns what the owner
// must carry out. It changes the state whole or not at all (see the package comment).
func (h *State) Record(o Outcome, now time.Time) Effects {
	pl := h.Pool(o.Model)
	lanes, model := h.lanes, -1
	if ml, own := h.models[o.Model]; own {
		lanes, model = ml, o.Model
	}
	t := &txn{h: h, o: o, now: now, pl: pl, model: model, ring: h.ring(pl), breaker: *h.breaker,
		probing: h.probing, lanes: *lanes, refused: h.refused[pl],
		eff: Effects{Recheck: -1}, probe: o.Probe, keyProbe: o.KeyProbe}
	t.apply()
	if testHookMidRecord != nil {
		testHookMidRecord()
	}
	// The commit: plain assignments, which cannot panic.
	h.swap(pl)
	*h.breaker, h.probing, *lanes = t.breaker, t.probing, t.lanes
	if t.refused != h.refused[pl] {
		h.refused[pl] = t.refused
	}
	t.eff.ProbeOver, t.eff.KeyProbeOver = o.Probe && !t.probe, o.KeyProbe && !t.keyProbe
	return t.eff
}

// txn is one Record's work on copies of what it may change.
type txn struct {
	h        *State
	o        Outcome
	now      time.Time
	pl       int
	model    int // as LanesChange.Model
	ring     *keys.Ring
	breaker  breaker.Breaker
	probing  bool
	lanes    capacity.Lanes
	refused  string
	probe    bool // the call is still the breaker's probe
	keyProbe bool // the call still probes its key
	eff      Effects
}

func (t *txn) apply() {
	switch t.o.Kind {
	case Failed:
		if t.failed() {
			return // a capacity refusal: the call waits again, and its key's probe with it
		}
	case Succeeded:
		t.keyProbeSucceeded()
		t.success()
		t.quota(t.o.Quota)
	case Neutral:
		t.neutral()
	case NotRun:
		t.neutral()
		return
	}
	t.keyProbeEnded()
}

// failed applies a failed attempt: a rate limit cools the key (or, stating a limit, sets the
// learned lanes), a refused key is set aside, a provider-down answer counts against the
// breaker. It reports a capacity refusal.
func (t *txn) failed() (refused bool) {
	o, now := t.o, t.now
	e, _ := errors.AsType[*llm.Error](o.Err)
	keyed := t.h.keyed[t.pl] && !o.StaleKeys
	switch retry.ClassOf(o.Err) {
	case retry.RateLimited:
		t.neutral()
		if e != nil {
			t.quota(e.Quota)
		}
		if e != nil && e.StatedLimit > 0 && !t.h.spec.Fixed {
			// The lanes learn the limit; no key rests (it was not the key's rate).
			t.learn(fmt.Sprintf("the backend stated a limit of %d concurrent calls", e.StatedLimit),
				func(l *capacity.Lanes) (capacity.Change, bool) { return l.Stated(e.StatedLimit, now) })
			t.eff.CapacityRefused = true
			return true
		}
		if keyed {
			var hint time.Duration
			if e != nil {
				hint = e.RetryAfter
			}
			end := t.ring.RateLimited(o.Key, hint, now)
			t.eff.Cooled = &Cooldown{Pool: t.pl, Key: o.Key, For: end.Sub(now)}
			t.eff.Recheck = t.pl
		}
		if !explained(e) {
			t.learn(fmt.Sprintf("an unexplained rate limit while %d calls ran", o.Running),
				func(l *capacity.Lanes) (capacity.Change, bool) { return l.RateLimited(o.Running, o.Started, now) })
		}
	case retry.BadKey:
		t.neutral()
		if keyed {
			t.keyRefused(e)
		}
	case retry.Down:
		t.failure()
	default:
		t.neutral()
	}
	return false
}

// explained reports whether a rate limit came with the bucket it hit (a remaining count of
// 0): a rate, not the backend's concurrency, so learned lanes do not halve for it.
func explained(e *llm.Error) bool {
	return e != nil && e.Quota != nil && (e.Quota.RequestsRemaining == 0 || e.Quota.TokensRemaining == 0)
}

// keyRefused sets aside the attempt's key (or the key for its model: keys.ScopeOf) after the
// backend refused it with e, or sets it aside again for longer when the call was its probe.
func (t *txn) keyRefused(e *llm.Error) {
	scope, reason := keys.WholeKey, "refused by the backend"
	if e != nil {
		scope, reason = keys.ScopeOf(e.UpstreamStatus, e.KeyInvalid), refusalReason(e)
		t.refused = e.Message
	}
	probe := t.keyProbe && t.o.ProbeKey == t.o.Key
	t.keyProbe = false
	ch := t.ring.Refused(t.o.Key, t.o.Model, scope, reason, probe, t.now)
	t.eff.Key = &KeyChange{Key: t.o.Key, Change: ch}
	t.eff.Recheck = t.pl
}

// refusalReason is what /admin/state shows of a refusal: the backend's status, code and
// message (the adapters keep keys out of it), cut short.
func refusalReason(e *llm.Error) string {
	msg := e.Message
	if r := []rune(msg); len(r) > 200 {
		msg = string(r[:200]) + "…"
	}
	if e.UpstreamCode != "" {
		return fmt.Sprintf("HTTP %d %s: %s", e.UpstreamStatus, e.UpstreamCode, msg)
	}
	return fmt.Sprintf("HTTP %d: %s", e.UpstreamStatus, msg)
}

// keyProbeSucceeded restores what the call probed when its answer came on that key (SPEC
// §10: a success restores it).
func (t *txn) keyProbeSucceeded() {
	if !t.keyProbe || t.o.ProbeKey != t.o.Key || t.o.StaleKeys {
		return
	}
	t.keyProbe = false
	t.eff.Key = &KeyChange{Key: t.o.Key, Change: t.ring.ProbeSucceeded(t.o.Key, t.o.Model)}
}

// keyProbeEnded lets the next call probe when the call, a probe, ended saying nothing of its
// key.
func (t *txn) keyProbeEnded() {
	if !t.keyProbe {
		return
	}
	t.keyProbe = false
	if !t.o.StaleKeys { // a reload's new ring has no probe out
		t.ring.ProbeEnded(t.o.ProbeKey, t.o.Model)
	}
}

// success is a backend that answered: a probe's success closes the breaker; a busy one may
// earn a lane back.
func (t *txn) success() {
	probe := t.probe
	t.breaker.Success(t.now, probe)
	if probe {
		t.probe, t.probing = false, false
		t.setCap()
	}
	// A probe's success closes the breaker, unless another replica's opened it again
	// meanwhile: then it probes anew.
	t.eff.Closed = probe && t.breaker.State(t.now) == breaker.Closed
	t.learn("successes with every lane busy", func(l *capacity.Lanes) (capacity.Change, bool) {
		return l.Succeeded(t.o.Busy, t.now)
	})
}

// failure is a provider-down answer: it counts against the breaker, which may open.
func (t *txn) failure() {
	was := t.breaker.State(t.now)
	t.breaker.Failure(t.now, t.probe)
	if t.probe {
		t.probe, t.probing = false, false
	}
	t.setCap()
	t.eff.Opened = was != breaker.Open && t.breaker.State(t.now) == breaker.Open
}

// neutral is an ending that says nothing of the provider's health; a probe's lets the next
// probe go.
func (t *txn) neutral() {
	if t.probe {
		t.breaker.Neutral(true)
		t.probe, t.probing = false, false
		t.setCap()
	}
}

func (t *txn) setCap() {
	t.eff.SetCap, t.eff.StartCap = true, startCap(&t.breaker, t.probing, t.now)
}

// quota applies the backend's remaining-requests count: 0 holds learned lanes.
func (t *txn) quota(q *llm.Quota) {
	if q == nil || q.RequestsRemaining < 0 {
		return
	}
	t.lanes.Remaining(q.RequestsRemaining, q.RequestsReset, t.now)
}

// learn applies f to the call's learned lanes and keeps the change, if any.
func (t *txn) learn(signal string, f func(*capacity.Lanes) (capacity.Change, bool)) {
	if ch, changed := f(&t.lanes); changed {
		t.eff.Lanes = &LanesChange{Model: t.model, Change: ch, Signal: signal}
	}
}
