// Package keys is the health of a provider's API keys (SPEC §10) as pure code: a round-robin
// ring whose keys cool down after a rate limit for exactly the backend's hint (else a default,
// never past a cap), are set aside for good when refused as invalid, and can say when the next
// one will be free.
//
// A Ring has no goroutines, timers or clock: every method that depends on time takes now, and
// now must not go backwards between calls. It is not safe for concurrent use; its owner (the
// provider actor) calls it from one goroutine. Keys are known by index only, so a Ring never
// holds a secret and its Snapshot can be shown as it is.
package keys

import "time"

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
	Ready   State = iota // may be picked
	Cooling              // rate-limited until its cooldown ends
	Invalid              // refused as invalid; set aside until the config is reloaded
)

func (s State) String() string {
	switch s {
	case Ready:
		return "ready"
	case Cooling:
		return "cooling"
	case Invalid:
		return "invalid"
	}
	return "unknown"
}

// Ring is the health of n keys and the round-robin turn between them.
type Ring struct {
	cooldown, maxCooldown time.Duration
	until                 []time.Time // per key: end of its cooldown; zero when it never cooled
	invalid               []bool
	next                  int // the key the next Pick tries first
}

// New returns a ring of n keys (at least one: a provider without keys sends none, which is
// one "key" that is never invalid in practice), all ready.
func New(n int, cfg Config) *Ring {
	n = max(n, 1)
	r := &Ring{cooldown: cfg.Cooldown, maxCooldown: cfg.MaxCooldown,
		until: make([]time.Time, n), invalid: make([]bool, n)}
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

// State returns key i's state at now. A cooldown ends exactly at its end: from then on the
// key is Ready again, so the next call re-probes it.
func (r *Ring) State(i int, now time.Time) State {
	switch {
	case r.invalid[i]:
		return Invalid
	case now.Before(r.until[i]):
		return Cooling
	}
	return Ready
}

// Pick returns the next ready key in round-robin order and moves the turn past it; ok is
// false when no key is ready (see NextFree and AllInvalid). skip, when not nil, excludes keys
// the caller does not want (those a call already tried).
func (r *Ring) Pick(now time.Time, skip func(i int) bool) (i int, ok bool) {
	n := len(r.until)
	for k := range n {
		i = (r.next + k) % n
		if r.State(i, now) == Ready && (skip == nil || !skip(i)) {
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

// ReadyAt is when key i may be picked again: the end of its cooldown, at or before now when
// it is ready. ok is false for a key set aside as invalid, which never is.
func (r *Ring) ReadyAt(i int) (t time.Time, ok bool) {
	if r.invalid[i] {
		return time.Time{}, false
	}
	return r.until[i], true
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

// SetInvalid sets key i aside: it is never picked again by this ring. A reload builds a new
// ring.
func (r *Ring) SetInvalid(i int) { r.invalid[i] = true }

// AllInvalid reports whether every key was refused as invalid (502 upstream_auth_failed).
func (r *Ring) AllInvalid() bool {
	for _, bad := range r.invalid {
		if !bad {
			return false
		}
	}
	return true
}

// NextFree is when the first key stops cooling: now when one is ready, the zero time when
// every key is invalid (waiting cannot help).
func (r *Ring) NextFree(now time.Time) time.Time {
	var first time.Time
	for i := range r.until {
		switch r.State(i, now) {
		case Ready:
			return now
		case Cooling:
			if first.IsZero() || r.until[i].Before(first) {
				first = r.until[i]
			}
		}
	}
	return first
}

// KeyState is one key as /admin/state shows it: its index, never the key.
type KeyState struct {
	Index    int           `json:"index"`
	State    string        `json:"state"`
	Cooldown time.Duration `json:"-"` // left at the snapshot's now; zero unless cooling
	// CooldownMs is Cooldown in whole milliseconds, rounded up so a cooling key never
	// reads 0.
	CooldownMs int64 `json:"cooldown_ms"`
}

// Snapshot describes every key at now.
func (r *Ring) Snapshot(now time.Time) []KeyState {
	out := make([]KeyState, len(r.until))
	for i := range out {
		s := r.State(i, now)
		out[i] = KeyState{Index: i, State: s.String()}
		if s == Cooling {
			left := r.until[i].Sub(now)
			out[i].Cooldown = left
			out[i].CooldownMs = int64((left + time.Millisecond - 1) / time.Millisecond)
		}
	}
	return out
}
