// Package health is what a provider knows of its backend beyond its queue (SPEC §10, §11),
// as pure code: its key rings (cooldowns, keys set aside and their re-probes), its circuit
// breaker and its half-open probe, its retry budget and its learned lanes.
//
// A State has no goroutines, timers, clock, logger or observer: every method that depends
// on time takes now. Its owner (the provider actor) tells it how each call began and ended
// and carries out the Effects it returns: what to tell the queue's policy, the log, the
// observer and the other replicas. It is not safe for concurrent use.
//
// Record applies an outcome whole or not at all: it computes the new state on copies and
// assigns them at the end, so a panic in the middle leaves the state as it was. That is what
// lets the provider actor keep its health across a crash as it is.
package health

import (
	"time"

	"github.com/tollgate/tollgate/actors/policy/breaker"
	"github.com/tollgate/tollgate/actors/policy/capacity"
	"github.com/tollgate/tollgate/actors/policy/keys"
	"github.com/tollgate/tollgate/actors/policy/retry"
)

// Spec is what a provider's health is made for: its settings and its key pools.
type Spec struct {
	Breaker     breaker.Config
	RetryBudget float64       // share of calls that may be retries; 0: retry.DefaultRatio
	Retries     int           // extra attempts per call; 0: none
	MaxWait     time.Duration // longest wait before a retry; 0: retry.DefaultMaxWait
	Keys        keys.Config
	Lanes       int  // the provider's configured lanes
	Probe       int  // the learned lanes' probe step (lanes_probe)
	Fixed       bool // learned lanes are off (adaptive_lanes: false)
	// Pool is the provider's own keys: pool 0.
	Pool Pool
	// Models are the provider's models by index; a model with keys of its own has a pool of
	// its own and learns its own model lanes.
	Models []Model
}

// Pool is one pool of keys, named: a reload matches keys that stay by their names.
type Pool struct {
	IDs   []string // the keys' names, at least one
	Keyed bool     // real keys; a pool without is one "key" that never rests
}

// Model is one model's part of the spec.
type Model struct {
	OwnKeys bool
	Pool    Pool // when OwnKeys; always keyed
	Lanes   int  // its configured model lanes
}

// State is one provider's health.
type State struct {
	rings []*keys.Ring // per pool: 0 the provider's keys, then models' own
	keyed []bool
	ids   [][]string  // per pool, its keys' names
	pool  map[int]int // model index → its own pool; absent: pool 0
	// refused is, per pool, what the backend said when it last refused a key as invalid
	// (the adapters' message, keys already cut out), for the answer once all are refused.
	refused map[int]string

	breaker *breaker.Breaker
	probing bool // the half-open probe is out
	budget  *retry.Budget
	retry   retry.Policy

	lanes  *capacity.Lanes         // the provider's effective lanes
	models map[int]*capacity.Lanes // models with keys of their own learn their model lanes

	spec Spec
	// scratch is the ring a change is worked out on (ring) before it is swapped in; it
	// keeps the storage of the ring it replaced for the next change.
	scratch keys.Ring
}

// New returns the health of a provider that has seen nothing yet.
func New(s Spec, now time.Time) *State {
	h := &State{pool: map[int]int{}, models: map[int]*capacity.Lanes{}, refused: map[int]string{},
		breaker: breaker.New(s.Breaker), budget: retry.NewBudget(s.RetryBudget), retry: retryPolicy(s),
		lanes: capacity.New(s.lanes(s.Lanes), now), spec: s}
	h.addPool(s.Pool)
	for m, mv := range s.Models {
		h.addModel(m, mv, now)
	}
	return h
}

// retryPolicy is the spec's retries: the policy's zero is its default, the spec's is none.
func retryPolicy(s Spec) retry.Policy {
	p := retry.Policy{Retries: s.Retries, MaxWait: s.MaxWait}
	if s.Retries == 0 {
		p.Retries = -1
	}
	return p
}

// lanes is the learning of a scope of n configured lanes.
func (s Spec) lanes(n int) capacity.Config {
	return capacity.Config{Lanes: n, Probe: s.Probe, Disabled: s.Fixed}
}

func (h *State) addPool(p Pool) {
	h.rings = append(h.rings, keys.New(len(p.IDs), h.spec.Keys))
	h.keyed = append(h.keyed, p.Keyed)
	h.ids = append(h.ids, p.IDs)
}

// addModel gives a model with keys of its own its pool and its own learned model lanes.
func (h *State) addModel(m int, mv Model, now time.Time) {
	if !mv.OwnKeys {
		return
	}
	h.pool[m] = len(h.rings)
	h.addPool(mv.Pool)
	h.models[m] = capacity.New(h.spec.lanes(mv.Lanes), now)
}

// StartCap is what the breaker lets start: anything closed (-1), nothing open, one probe
// half-open.
func (h *State) StartCap(now time.Time) int { return startCap(h.breaker, h.probing, now) }

func startCap(b *breaker.Breaker, probing bool, now time.Time) int {
	switch b.State(now) {
	case breaker.Closed:
		return -1
	case breaker.HalfOpen:
		if !probing {
			return 1
		}
	}
	return 0
}

// Allow asks the breaker whether a call may start at now and reports whether it is the
// half-open probe, which its ending must report (Outcome.Probe).
func (h *State) Allow(now time.Time) (ok, probe bool) {
	b := *h.breaker
	ok, probe = b.Allow(now)
	*h.breaker, h.probing = b, h.probing || probe
	return ok, probe
}

// Began records that a call of model m began an attempt on key at now: whether it probes a
// set-aside key or pair (its ending must report it: Outcome.KeyProbe), and, for a first
// attempt, the call the retry budget earns from. It returns whether the attempt is that
// key's probe.
func (h *State) Began(m, key int, first bool, now time.Time) (keyProbe bool) {
	pl := h.Pool(m)
	ring, budget := h.ring(pl), *h.budget
	if h.keyed[pl] && key >= 0 && key < ring.Len() {
		keyProbe = ring.Began(key, m, now)
	}
	if first {
		budget.Call(now)
	}
	h.swap(pl)
	*h.budget = budget
	return keyProbe
}

// KeyProbe marks a call of model m that retries on key as that key's probe when its
// re-probe is due; the retry budget is not charged (Retry spent it).
func (h *State) KeyProbe(m, key int, now time.Time) bool {
	pl := h.Pool(m)
	if !h.keyed[pl] || key < 0 || key >= h.rings[pl].Len() {
		return false
	}
	probe := h.ring(pl).Began(key, m, now)
	h.swap(pl)
	return probe
}

// ring is pool pl's ring copied to scratch, for a change to be worked out on.
func (h *State) ring(pl int) *keys.Ring {
	h.rings[pl].CopyTo(&h.scratch)
	return &h.scratch
}

// swap puts the ring worked out on scratch in pool pl's place: the queue's policy, which
// holds the pool's *keys.Ring, sees the change; scratch keeps the replaced storage.
func (h *State) swap(pl int) { *h.rings[pl], h.scratch = h.scratch, *h.rings[pl] }

// Cooled applies a cooldown another replica gave key of pool pl, as if this backend had
// answered the key with that hint; false for a key it does not know.
func (h *State) Cooled(pl, key int, d time.Duration, now time.Time) bool {
	if pl < 0 || pl >= len(h.rings) || !h.keyed[pl] || key < 0 || key >= h.rings[pl].Len() {
		return false
	}
	h.rings[pl].RateLimited(key, d, now)
	return true
}

// OpenedElsewhere opens the breaker until another replica's probes, d from now, unless it
// is open longer already. It reports whether that changed the breaker and whether it was
// open before.
func (h *State) OpenedElsewhere(d time.Duration, now time.Time) (changed, wasOpen bool) {
	b := *h.breaker
	wasOpen = b.State(now) == breaker.Open
	changed = b.OpenedElsewhere(now, d)
	*h.breaker = b
	return changed, wasOpen
}
