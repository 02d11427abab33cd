// Package keys is the health of a provider's API keys (SPEC §10) as pure code: a round-robin
// ring whose keys cool down after a rate limit for exactly the backend's hint (else a default,
// never past a cap), are set aside when refused (the key for every model, or one (key, model)
// pair; aside.go) and re-probed with one real call later, and can say when the next one will
// be free.
//
// A Ring has no goroutines, timers or clock: every method that depends on time takes now, and
// now must not go backwards between calls. It is not safe for concurrent use; its owner (the
// provider actor) calls it from one goroutine. Keys are known by index only, so a Ring never
// holds a secret and its Snapshot can be shown as it is.
package keys

import (
	"slices"
	"time"
)

// Defaults of SPEC §10, used for a zero Config field.
const (
	DefaultCooldown    = 10 * time.Second
	DefaultMaxCooldown = 5 * time.Minute
)

// Config is a ring's cooldown rule. A zero field takes its default.
type Config struct {
	// Cooldown is how long a key cools after a rate limit that came with no hint
	// (key_cooldown); zero means DefaultCooldown.
	Cooldown time.Duration
	// MaxCooldown caps every cooldown, hinted or not (max_key_cooldown); zero means
	// DefaultMaxCooldown. A hint above it is cut to it: a backend that asks for an hour is
	// re-probed after MaxCooldown, and if it is still limited it says so again.
	MaxCooldown time.Duration
}

// State is what a key can be used for now.
type State int

const (
	Ready    State = iota // may be picked
	Cooling               // rate-limited until its cooldown ends
	SetAside              // refused (401/403); waits for its re-probe, or its probe is out
)

func (s State) String() string {
	switch s {
	case Ready:
		return "ready"
	case Cooling:
		return "cooling"
	case SetAside:
		return "set_aside"
	}
	return "unknown"
}

// Ring is the health of n keys and the round-robin turn between them.
type Ring struct {
	cooldown, maxCooldown time.Duration
	until                 []time.Time // per key: end of its cooldown; zero when it never cooled
	aside                 []*aside    // per key: set aside for every model; nil when not
	pairs                 map[pair]*aside
	next                  int // the key the next Pick tries first
}

// pair is one key for one model: what a 403 for that model sets aside.
type pair struct{ key, model int }

// New returns a ring of n keys (at least one: a provider without keys sends none, which is
// one "key" that is never invalid in practice), all ready.
func New(n int, cfg Config) *Ring {
	n = max(n, 1)
	r := &Ring{cooldown: cfg.Cooldown, maxCooldown: cfg.MaxCooldown,
		until: make([]time.Time, n), aside: make([]*aside, n), pairs: map[pair]*aside{}}
	if r.cooldown <= 0 {
		r.cooldown = DefaultCooldown
	}
	if r.maxCooldown <= 0 {
		r.maxCooldown = DefaultMaxCooldown
	}
	r.cooldown = min(r.cooldown, r.maxCooldown)
	return r
}

// Len is the number of keys.
func (r *Ring) Len() int { return len(r.until) }

// State returns key i's state for model m at now (m < 0: the key's own, whatever model). A
// cooldown ends exactly at its end: from then on the key is Ready again, so the next call
// re-probes it. A set-aside key or pair is Ready again at its re-probe time, for one call
// (Began makes it the probe; SetAside while the probe is out).
func (r *Ring) State(i, m int, now time.Time) State {
	switch {
	case r.aside[i].holds(now) || m >= 0 && r.pairs[pair{i, m}].holds(now):
		return SetAside
	case now.Before(r.until[i]):
		return Cooling
	}
	return Ready
}

// Pick returns the next key ready for model m in round-robin order and moves the turn past
// it; ok is false when no key is ready (see NextFree and AllRefused). skip, when not nil,
// excludes keys the caller does not want (those a call already tried).
func (r *Ring) Pick(m int, now time.Time, skip func(i int) bool) (i int, ok bool) {
	n := len(r.until)
	for k := range n {
		i = (r.next + k) % n
		if r.State(i, m, now) == Ready && (skip == nil || !skip(i)) {
			r.next = (i + 1) % n
			return i, true
		}
	}
	return 0, false
}

// Turn is the key the next Pick tries first: a caller that plays picks forward in thought
// (the admission's simulation) starts there.
func (r *Ring) Turn() int { return r.next }

// SetTurn makes key i the one the next Pick tries first: a caller undoing picks it made (an
// aborted batch) puts the turn back. An index out of range is ignored.
func (r *Ring) SetTurn(i int) {
	if i >= 0 && i < len(r.until) {
		r.next = i
	}
}

// ReadyAt is when key i may be picked again for model m: the end of its cooldown or, when it
// is set aside, its re-probe time, whichever is later; at or before now when it is ready. ok
// is false while a probe of it is out: only that call's end can change it.
func (r *Ring) ReadyAt(i, m int) (t time.Time, ok bool) {
	t = r.until[i]
	for _, a := range []*aside{r.aside[i], r.pairOf(i, m)} {
		switch {
		case a == nil:
		case a.probing:
			return time.Time{}, false
		case a.until.After(t):
			t = a.until
		}
	}
	return t, true
}

// CoolsUntil is the end of key i's cooldown; ok is false for a key set aside for every
// model, whose cooldown says nothing while it waits for its probe.
func (r *Ring) CoolsUntil(i int) (t time.Time, ok bool) {
	return r.until[i], r.aside[i] == nil
}

// CooldownFor is how long a rate limit with the backend's hint (zero: none) cools a key:
// the hint, else Cooldown, never more than MaxCooldown.
func (r *Ring) CooldownFor(hint time.Duration) time.Duration {
	if hint <= 0 {
		return r.cooldown
	}
	return min(hint, r.maxCooldown)
}

// RateLimited records that key i was answered with a rate limit at now, and returns when its
// cooldown ends. Calls that were already running on the key may report theirs later: the key
// then cools until the latest end any of them asked for, each of which is some hint's own end.
func (r *Ring) RateLimited(i int, hint time.Duration, now time.Time) time.Time {
	end := now.Add(r.CooldownFor(hint))
	if end.After(r.until[i]) {
		r.until[i] = end
	}
	return r.until[i]
}

// NextFree is when the first key is ready for model m: now when one is, else the earliest
// ReadyAt; the zero time when every key's probe is out (only a call's end can change it).
func (r *Ring) NextFree(m int, now time.Time) time.Time {
	var first time.Time
	for i := range r.until {
		if r.State(i, m, now) == Ready {
			return now
		}
		if at, ok := r.ReadyAt(i, m); ok && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	return first
}

// KeyState is one key as /admin/state shows it: its index, never the key.
type KeyState struct {
	Index int `json:"index"`
	// State is the key's own ("ready", "cooling", "set_aside"), whatever model; a key
	// set aside stays "set_aside" until its probe succeeds, also once its re-probe is due.
	State    string        `json:"state"`
	Cooldown time.Duration `json:"-"` // left at the snapshot's now; zero unless cooling
	// CooldownMs is Cooldown in whole milliseconds, rounded up so a cooling key never
	// reads 0.
	CooldownMs int64 `json:"cooldown_ms"`
	// SetAside says why and until when the key is set aside for every model; nil when not.
	SetAside *AsideState `json:"set_aside,omitempty"`
	// Models are the models this key is set aside for alone (a 403 for them), by index;
	// the owner names them.
	Models []ModelAside `json:"models_set_aside,omitempty"`
}

// Snapshot describes every key at now, its set-aside models in index order.
func (r *Ring) Snapshot(now time.Time) []KeyState {
	out := make([]KeyState, len(r.until))
	for i := range out {
		s := r.State(i, -1, now)
		out[i] = KeyState{Index: i, State: s.String()}
		if s == Cooling {
			left := r.until[i].Sub(now)
			out[i].Cooldown = left
			out[i].CooldownMs = ceilMs(left)
		}
		if a := r.aside[i]; a != nil {
			out[i].State = SetAside.String()
			out[i].SetAside = a.state(now)
		}
	}
	for p, a := range r.pairs {
		out[p.key].Models = append(out[p.key].Models, ModelAside{Model: p.model, AsideState: *a.state(now)})
	}
	for i := range out {
		slices.SortFunc(out[i].Models, func(a, b ModelAside) int { return a.Model - b.Model })
	}
	return out
}

// ceilMs is d in whole milliseconds, rounded up.
func ceilMs(d time.Duration) int64 { return int64((d + time.Millisecond - 1) / time.Millisecond) }
