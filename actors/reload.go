package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Changes is what a Reconfigure changed, by provider name.
type Changes struct {
	Added   []string // providers in new slots
	Removed []string // retired: they finish what they run and have queued, then stop
	Changed []string // settings, models or backend changed
	// Rebuilt are providers that were out of service: each gets a new slot and a fresh actor,
	// and its old one retires as a removed provider does.
	Rebuilt []string
}

// reconfigureTimeout bounds Reconfigure's wait for the actors, which answer at once unless
// one is rebuilding after a crash (then its strategy sends the change again) or the actor
// system is gone.
const reconfigureTimeout = 10 * time.Second

// Reconfigure applies new options to the running gateway without dropping work (SPEC §16):
// the caps, providers added, removed and changed, their models, keys, fallbacks and the
// routes. opts is validated as New validates; an invalid one changes nothing. Its Logger,
// Observer and Now are not used: those of New stay.
//
// Providers are matched by name, models by name within their provider. A provider or model
// that stays keeps its slot and index, so what it runs and has queued is untouched: running
// calls finish on the settings, backend and run timer they started with, queued calls keep
// their place and deadline, and lowered limits bind only what starts or enters from now on.
// A new provider gets a slot never used before. A removed provider or model admits nothing
// new at once (404 model_not_found, as for an unknown model), finishes what it runs and has
// queued, and then its actors stop. A name is one provider: one added back while its removed
// actor still finishes takes that slot back (it serves again, its running calls counted in
// its lanes); only once the actor has begun to stop, with nothing left, does it get a new one. The change reaches the actors first and Start's table
// last, so a call can only be routed to what its provider actor already knows.
func (g *Gateway) Reconfigure(ctx context.Context, opts Options) (Changes, error) {
	if err := validate(&opts); err != nil {
		return Changes{}, err
	}
	g.changeMu.Lock()
	defer g.changeMu.Unlock()
	switch {
	case g.draining.Load():
		return Changes{}, errors.New("reconfigure: the gateway is shutting down")
	case g.Failed() != nil:
		return Changes{}, fmt.Errorf("reconfigure: %w", g.Failed())
	}
	pl := planReload(g.table.Load(), g.slots.all(), &opts)
	m, ch := pl.m, pl.ch
	m.acks = make(chan reconfigured, 4*(1+len(m.change)+len(m.remove)))
	g.slots.Store(&pl.slots) // before the supervisor spawns into them; no route leads there yet
	send(g.system.Root, g.supervisor, m)
	err := m.await(ctx, g.stopped)
	// Published even after a timeout: what was sent is applied, or is being sent again by a
	// supervision strategy, and the table must describe the actors.
	g.caps.Store(&caps{limits: m.limits, retryAfter: opts.RetryAfter})
	t := buildTable(pl.provs, pl.models, opts.Routes)
	g.tableMu.Lock()
	g.table.Store(t)
	g.tableMu.Unlock()
	if err != nil {
		err = fmt.Errorf("%w: %w", ErrUnconfirmed, err)
	}
	return ch, err
}

// reloadPlan is what a reload changes, worked out from the table in force before anything
// is sent: the slots and served providers after it, the supervisor's message, and the
// Changes it reports.
type reloadPlan struct {
	old           *modelTable
	slots         []*slot
	provs         []servedProvider
	models        [][]Model
	live, removed map[string]int // by name: the live slot, and the latest removed one
	kept, rebuilt map[int]bool   // slots that stay, and those out of service rebuilt anew
	m             *reconfigure
	ch            Changes
}

func planReload(old *modelTable, slots []*slot, opts *Options) *reloadPlan {
	pl := &reloadPlan{old: old, slots: slots, provs: slices.Clone(old.provs), models: slices.Clone(old.models),
		live: map[string]int{}, removed: map[string]int{}, kept: map[int]bool{}, rebuilt: map[int]bool{},
		m: &reconfigure{limits: capsOf(opts).limits}}
	for p, sp := range old.provs {
		if sp.live {
			pl.live[sp.Name] = p
		} else {
			pl.removed[sp.Name] = p // the latest slot of the name
		}
	}
	for _, pv := range opts.Providers {
		pl.provider(pv)
	}
	for p, sp := range old.provs {
		if sp.live && !pl.kept[p] {
			pl.provs[p].live = false
			pl.m.remove = append(pl.m.remove, p)
			if !pl.rebuilt[p] {
				pl.ch.Removed = append(pl.ch.Removed, sp.Name)
			}
		}
	}
	return pl
}

// provider plans pv: a new slot, or a change of the slot it keeps or takes back.
func (pl *reloadPlan) provider(pv Provider) {
	old, ch := pl.old, &pl.ch
	p, ok := pl.live[pv.Name]
	if ok && old.provs[p].slot.down.Load() {
		// Out of service: rebuilt in a new slot below; the old slot retires as removed.
		pl.rebuilt[p], ok = true, false
		ch.Rebuilt = append(ch.Rebuilt, pv.Name)
	}
	revive := false
	if q, was := pl.removed[pv.Name]; !ok && was && old.provs[q].slot.revive() {
		// A name is one provider: added back while its removed actor still finishes its
		// calls, it takes its slot back, so the backend never sees two actors' lanes.
		p, ok, revive = q, true, true
		ch.Added = append(ch.Added, pv.Name)
	}
	if !ok {
		sl := &slot{p: len(pl.slots), name: pv.Name}
		pl.slots = append(pl.slots, sl)
		pl.provs = append(pl.provs, servedProvider{Provider: pv, slot: sl, live: true, gone: make([]bool, len(pv.Models))})
		pl.models = append(pl.models, pv.Models)
		pl.m.add = append(pl.m.add, providerSetup{slot: sl, pv: pv, models: pv.Models, gone: make([]bool, len(pv.Models))})
		if !slices.Contains(ch.Rebuilt, pv.Name) {
			ch.Added = append(ch.Added, pv.Name)
		}
		return
	}
	pl.kept[p] = true
	was := old.provs[p]
	ms, gone := mergeModels(old.models[p], was.gone, pv.Models)
	pl.provs[p] = servedProvider{Provider: pv, slot: was.slot, live: true, gone: gone}
	pl.models[p] = ms
	pl.m.change = append(pl.m.change, providerSetup{slot: was.slot, pv: pv, models: ms, gone: gone, keys: was.Backend != pv.Backend, revive: revive})
	if !revive && providerChanged(&was.Provider, old.models[p], was.gone, &pv, ms, gone) {
		ch.Changed = append(ch.Changed, pv.Name)
	}
}

// ErrUnconfirmed is in Reconfigure's error when the change was sent and published but not
// every actor confirmed it in time: the new settings are in force (or being resent by a
// supervision strategy), so a caller must treat them as applied.
var ErrUnconfirmed = errors.New("the change is in force but not every actor confirmed it")

// await waits for the supervisor's and every changed or removed provider's answer.
func (m *reconfigure) await(ctx context.Context, stopped <-chan struct{}) error {
	want := map[int]bool{-1: true}
	for _, ps := range m.change {
		want[ps.slot.p] = true
	}
	for _, p := range m.remove {
		want[p] = true
	}
	t := time.NewTimer(reconfigureTimeout)
	defer t.Stop()
	var errs []error
	// ctx may end the wait only after the supervisor's answer: the table is published when
	// this returns, and must not lead to a provider the supervisor has not spawned yet.
	var done <-chan struct{}
	for len(want) > 0 {
		select {
		case r := <-m.acks:
			if want[r.p] && r.err != nil {
				errs = append(errs, r.err)
			}
			delete(want, r.p)
			if !want[-1] {
				done = ctx.Done()
			}
		case <-done:
			return fmt.Errorf("reconfigure: %w (the change goes on in the actors)", ctx.Err())
		case <-stopped:
			return errors.New("reconfigure: the gateway has stopped")
		case <-t.C:
			return fmt.Errorf("reconfigure: %d actors did not answer within %s", len(want), reconfigureTimeout)
		}
	}
	return errors.Join(errs...)
}

// mergeModels lays next over a provider's models: a model of the same name that was served
// keeps its index and takes its new settings; a new one is appended; one that next lacks is
// marked gone. Indexes are never reused, so a model removed and added again gets a new one.
func mergeModels(old []Model, gone []bool, next []Model) ([]Model, []bool) {
	ms := slices.Clone(old)
	out := make([]bool, len(old))
	at := map[string]int{}
	for i, mv := range old {
		out[i] = true
		if !gone[i] {
			at[mv.Name] = i
		}
	}
	for _, mv := range next {
		if i, ok := at[mv.Name]; ok {
			ms[i], out[i] = mv, false
			continue
		}
		ms = append(ms, mv)
		out = append(out, false)
	}
	return ms, out
}

// providerChanged reports whether a reload changes anything of a provider that stays.
func providerChanged(was *Provider, wasModels []Model, wasGone []bool, pv *Provider, models []Model, gone []bool) bool {
	if was.Backend != pv.Backend || !slices.Equal(was.Aliases, pv.Aliases) || !slices.Equal(was.KeyIDs, pv.KeyIDs) {
		return true
	}
	a, b := *was, *pv
	a.Models, b.Models, a.Aliases, b.Aliases, a.KeyIDs, b.KeyIDs = nil, nil, nil, nil, nil, nil
	if !sameSettings(&a, &b) || !slices.Equal(wasGone, gone) || len(wasModels) != len(models) {
		return true
	}
	for i := range models {
		x, y := wasModels[i], models[i]
		if x.Lanes != y.Lanes || x.OwnKeys != y.OwnKeys || x.FallbackOn != y.FallbackOn || !slices.Equal(x.Aliases, y.Aliases) ||
			!slices.Equal(x.Fallbacks, y.Fallbacks) || !slices.Equal(x.KeyIDs, y.KeyIDs) {
			return true
		}
	}
	return false
}

// sameSettings compares the comparable settings of two providers (slices and the backend
// are the caller's to compare).
func sameSettings(a, b *Provider) bool {
	type settings struct {
		name, kind                   string
		lanes, queue, keys, retries  int
		queueTimeout, runTimeout     time.Duration
		rate, keyRate                RateLimit
		cooldown, maxCooldown, retry time.Duration
		budget                       float64
		fixed                        bool
		probe                        int
	}
	of := func(p *Provider) any {
		return settings{p.Name, p.Kind, p.Lanes, p.QueueLength, p.Keys, p.Retries, p.QueueTimeout, p.RunTimeout,
			p.RateLimit, p.KeyRateLimit, p.KeyCooldown, p.MaxKeyCooldown, p.MaxRetryWait, p.RetryBudget, p.FixedLanes, p.LanesProbe}
	}
	return of(a) == of(b) && a.Breaker == b.Breaker
}
