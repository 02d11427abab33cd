package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/cmd/internal/app"
	"github.com/tollgate/tollgate/cmd/internal/fakellm"
)

// The reload scenario: 200 streaming clients keep every provider busy while the gateway is
// reloaded, step by step: lanes and max_running lowered, then raised; a key replaced; a
// provider added and one removed; the removed one added back while it still finishes its
// queue, then removed again; an invalid file. No client may be lost or answered with an
// unexpected error (a 404 is expected only for a removed provider's model, asked for while
// it was removed), every call admitted by the removed provider finishes, each name is listed
// once after every reload, and at every moment a backend sees no more calls than the
// settings in force allow (before the provider added back took its slot back, its backend
// saw 4 calls at lanes 2).
func init() {
	scenarios = append(scenarios, scenario{name: "reload", localOnly: true,
		about: "200 streaming clients while lanes are lowered and raised, a key replaced, a provider added and one removed, added back while it finishes and removed again, and an invalid file is refused: nothing lost, caps of the settings in force kept, each name one provider, the removed provider finishes its calls",
		run:   reloadScenario})
}

const (
	reloadClients = 200
	reloadPhase   = 600 * time.Millisecond // load between two reloads
)

// reloadAnswer keeps a call running about 60 ms: every lane is busy and every queue long
// at each reload, and a client's turn still comes several times per phase.
var reloadAnswer = fakellm.Options{Latency: 10 * time.Millisecond, Chunks: 10, ChunkInterval: 5 * time.Millisecond}

// reloadSteps are the setups reloaded in turn; an invalid one is refused.
type reloadStep struct {
	name    string
	s       setup
	invalid bool
}

func reloadSetups() (setup, []reloadStep) {
	prov := func(name string, lanes int, keys []string, models ...model) provider {
		return provider{name: name, lanes: lanes, queueLength: 200, queueTimeout: time.Minute, backend: reloadAnswer,
			models: models, keys: keys}
	}
	keysB := []string{"key-beta-1", "key-beta-2"}
	delta := prov("delta", 3, nil, model{"d1", 3})
	base := setup{name: "reload", maxRunning: 10, maxAdmitted: 400, providers: []provider{
		prov("alpha", 6, nil, model{"a1", 3}, model{"a2", 3}),
		prov("beta", 4, keysB, model{"b1", 2}, model{"b2", 2}),
		prov("gamma", 2, nil, model{"g1", 1}, model{"g2", 1}),
	}, spare: []provider{delta}}
	with := func(maxRunning int, ps ...provider) setup {
		s := base
		s.maxRunning, s.providers = maxRunning, ps
		return s
	}
	lowered := with(6, prov("alpha", 2, nil, model{"a1", 1}, model{"a2", 1}), prov("beta", 2, keysB, model{"b1", 1}, model{"b2", 1}),
		base.providers[2])
	raised := with(12, prov("alpha", 8, nil, model{"a1", 4}, model{"a2", 4}), base.providers[1], base.providers[2])
	rekeyed := raised
	rekeyed.providers = slices.Clone(raised.providers)
	rekeyed.providers[1] = prov("beta", 4, []string{"key-beta-1", "key-beta-3"}, model{"b1", 2}, model{"b2", 2})
	swapped := rekeyed
	swapped.providers = []provider{rekeyed.providers[0], rekeyed.providers[1], delta}
	readded := swapped
	readded.providers = append(slices.Clone(swapped.providers), base.providers[2])
	invalid := readded
	invalid.providers = slices.Clone(readded.providers)
	invalid.providers[0].lanes = -1
	return base, []reloadStep{
		{name: "lanes and max_running lowered", s: lowered},
		{name: "lanes and max_running raised", s: raised},
		{name: "a key replaced", s: rekeyed},
		{name: "delta added, gamma removed", s: swapped},
		// Still finishing its queue, gamma is one provider again, not a second one; then it
		// goes for good.
		{name: "gamma added back while it finishes", s: readded},
		{name: "gamma removed again", s: swapped},
		{name: "an invalid file", s: invalid, invalid: true},
	}
}

// version is one setup in force, from when the reload that made it began until the next
// reload returned (in between, either may be what the actors apply).
type version struct {
	s          setup
	from, till time.Time // till zero: still in force
}

// entry is one call as a backend saw it arrive.
type entry struct {
	provider, model, tag string
	at                   time.Time
	backend, inModel     int64
	total                int64
}

func reloadScenario(ctx context.Context, o runOpts) []*result {
	base, steps := reloadSetups()
	r := runLocal(ctx, "reload", base, reloadClients+16, func(e *env, r *result) { reloadLoad(ctx, e, r, steps, o.seed) })
	return []*result{r}
}

func reloadLoad(ctx context.Context, e *env, r *result, steps []reloadStep, seed uint64) {
	run := newReloadRun(e, r)
	stop := run.drive(ctx, seed)
	for _, st := range steps {
		pause(ctx, reloadPhase)
		run.step(ctx, st)
	}
	pause(ctx, reloadPhase)
	run.judge(ctx, stop())
}

// reloadRun is the reload scenario's record while it runs: what the backends saw, when each
// call was sent, which setup was in force when, and which models were removed when.
type reloadRun struct {
	e *env
	r *result

	mu      sync.Mutex           // guards entries and sent
	entries []entry              // each call as its backend saw it arrive
	sent    map[string]time.Time // call tag → when it was sent

	versions []version                // the setups in force, in turn
	served   atomic.Pointer[[]string] // the model ids the clients ask for now
	removed  map[string][]window      // model id → from when a reload removing it began until one adding it back returned
}

// newReloadRun starts recording what each local backend sees.
func newReloadRun(e *env, r *result) *reloadRun {
	run := &reloadRun{e: e, r: r, sent: map[string]time.Time{}, removed: map[string][]window{},
		versions: []version{{s: e.setup, from: time.Now()}}}
	for _, b := range e.local.backends {
		name := b.spec.name
		b.tap.onEnter = func(model, tag string, backend, inModel int64) {
			en := entry{provider: name, model: model, tag: tag, at: time.Now(), backend: backend, inModel: inModel, total: e.local.global.now.Load()}
			run.mu.Lock()
			run.entries = append(run.entries, en)
			run.mu.Unlock()
		}
	}
	ids := e.setup.ids()
	run.served.Store(&ids)
	return run
}

// drive starts the streaming clients, each asking for a model served at that moment. The
// function it returns stops them and returns every outcome once the last call is answered.
func (run *reloadRun) drive(ctx context.Context, seed uint64) (stop func() []outcome) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	outs := make([][]outcome, reloadClients)
	var seq atomic.Int64
	for i := range reloadClients {
		wg.Go(func() { // exits once done is closed and its last call is answered
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			for {
				select {
				case <-done:
					return
				default:
				}
				list := *run.served.Load()
				tag := fmt.Sprintf("r%d", seq.Add(1))
				c := call{model: list[rng.IntN(len(list))], stream: true, tag: tag}
				run.mu.Lock()
				run.sent[tag] = time.Now()
				run.mu.Unlock()
				outs[i] = append(outs[i], send(ctx, run.e.client, run.e.base, c))
			}
		})
	}
	return func() []outcome {
		close(done)
		wg.Wait()
		return slices.Concat(outs...)
	}
}

// step reloads the gateway with st's setup and checks the reload's answer and the state after.
func (run *reloadRun) step(ctx context.Context, st reloadStep) {
	e, r := run.e, run.r
	before, _ := e.state(ctx)
	next := st.s
	e.local.next.Store(&next)
	began := time.Now()
	noteGamma(r, before, next)
	if !st.invalid {
		run.withdraw(next, began)
	}
	_, err := e.local.app.Reload(ctx)
	var bad *app.InvalidConfig
	switch {
	case st.invalid && !errors.As(err, &bad):
		r.breach("%s: reload answered %v, want the invalid file refused", st.name, err)
		return
	case st.invalid:
		if after, _ := e.state(ctx); !sameLanes(before, after) {
			r.breach("%s changed the gateway: before %+v after %+v", st.name, before.Providers, after.Providers)
		}
		return
	case err != nil:
		r.breach("%s: reload: %v", st.name, err)
		return
	}
	run.commit(next, began)
	after, _ := e.state(ctx)
	for _, p := range next.providers {
		if n := countProviders(after, p.name); n != 1 {
			r.breach("%s: %s listed %d times after the reload: a name is one provider", st.name, p.name, n)
		}
	}
}

// noteGamma records how much the provider gamma held when a reload removed it or added it
// back while it was still retiring; a removal that found it idle proves nothing.
func noteGamma(r *result, before stateDoc, next setup) {
	p := providerState(before, "gamma")
	if p == nil {
		return
	}
	kept := slices.ContainsFunc(next.providers, func(q provider) bool { return q.name == "gamma" })
	switch {
	case !kept:
		r.Figures["gamma_admitted_at_removal"] = float64(p.Running + p.Queued)
		if p.Running+p.Queued == 0 {
			r.breach("gamma had nothing running or queued when it was removed: the step proved nothing")
		}
	case p.State == "retiring":
		r.Figures["gamma_admitted_when_added_back"] = float64(p.Running + p.Queued)
	}
}

// withdraw stops the clients asking for the models next removes, from when its reload began.
func (run *reloadRun) withdraw(next setup, began time.Time) {
	served := *run.served.Load()
	kept := slices.DeleteFunc(slices.Clone(served), func(id string) bool { return !slices.Contains(next.ids(), id) })
	for _, id := range served {
		if !slices.Contains(kept, id) {
			run.removed[id] = append(run.removed[id], window{from: began})
		}
	}
	run.served.Store(&kept)
}

// commit records next as in force once its reload returned, closes the removal windows of the
// models it adds back, and lets the clients ask for all its models.
func (run *reloadRun) commit(next setup, began time.Time) {
	run.versions[len(run.versions)-1].till = time.Now()
	run.versions = append(run.versions, version{s: next, from: began})
	ids := next.ids()
	for _, id := range ids {
		if w := run.removed[id]; len(w) > 0 && w[len(w)-1].till.IsZero() {
			w[len(w)-1].till = time.Now() // added back
		}
	}
	run.served.Store(&ids)
}

// judge holds the answered calls and the backends' arrivals to the scenario's rules.
func (run *reloadRun) judge(ctx context.Context, all []outcome) {
	e, r := run.e, run.r
	expected404 := 0
	for i := range all {
		o := &all[i]
		if o.status == 404 && o.code == "model_not_found" && within(run.removed[o.call.model], run.sent[o.call.tag]) {
			o.breach = "" // asked for after its removal began: an honest 404
			expected404++
		}
	}
	r.add(all)
	r.Figures["reloads"] = float64(len(run.versions) - 1)
	r.Figures["expected_404_after_removal"] = float64(expected404)
	if n := count(all, ok); n == 0 {
		r.breach("no call succeeded")
	}
	checkInForce(r, run.entries, run.sent, run.versions)
	if st, err := e.waitState(ctx, 5*time.Second, func(st stateDoc) bool { return providerState(st, "gamma") == nil }); err != nil {
		r.breach("the removed provider gamma did not stop: %v (%+v)", err, st.Providers)
	}
	envelope(e, run.versions)
}

// window is a stretch of time; till zero: still open.
type window struct{ from, till time.Time }

// within reports whether t falls in one of ws.
func within(ws []window, t time.Time) bool {
	for _, w := range ws {
		if !t.Before(w.from) && (w.till.IsZero() || t.Before(w.till)) {
			return true
		}
	}
	return false
}

// countProviders is how many providers of st are named name.
func countProviders(st stateDoc, name string) int {
	n := 0
	for _, p := range st.Providers {
		if p.Name == name {
			n++
		}
	}
	return n
}

// checkInForce holds every call's arrival at its backend to the settings in force while it
// was admitted: between the moment it was sent and the moment it arrived, some version must
// allow the backend's, its model's and the gateway's concurrency counting it.
func checkInForce(r *result, entries []entry, sent map[string]time.Time, versions []version) {
	over := 0
	for _, en := range entries {
		from, ok := sent[en.tag]
		if !ok {
			continue
		}
		var lanes, modelLanes, running int
		for _, v := range versions {
			if en.at.Before(v.from) || !v.till.IsZero() && v.till.Before(from) {
				continue // not in force while this call was admitted
			}
			running = max(running, v.s.maxRunning)
			for _, p := range v.s.providers {
				if p.name != en.provider {
					continue
				}
				lanes = max(lanes, p.lanes)
				for _, m := range p.models {
					if m.name == en.model {
						modelLanes = max(modelLanes, m.lanes)
					}
				}
			}
		}
		if en.backend > int64(lanes) || en.inModel > int64(modelLanes) || en.total > int64(running) {
			over++
			if over <= 5 {
				r.breach("call %s reached %s/%s as %d on the backend (lanes in force ≤ %d), %d on the model (≤ %d), %d in all (max_running ≤ %d)",
					en.tag, en.provider, en.model, en.backend, lanes, en.inModel, modelLanes, en.total, running)
			}
		}
	}
	r.Figures["backend_arrivals_checked"] = float64(len(entries))
	if over > 5 {
		r.breach("%d arrivals over the settings in force in all", over)
	}
}

// envelope makes the setup the shared end-of-run checks hold the maxima to the largest
// settings that were ever in force.
func envelope(e *env, versions []version) {
	top := map[string]*provider{}
	for _, v := range versions {
		e.setup.maxRunning = max(e.setup.maxRunning, v.s.maxRunning)
		for _, p := range v.s.providers {
			if t := top[p.name]; t == nil {
				cp := p
				cp.models = slices.Clone(p.models)
				top[p.name] = &cp
			} else {
				t.lanes = max(t.lanes, p.lanes)
				for i := range t.models {
					for _, m := range p.models {
						if m.name == t.models[i].name {
							t.models[i].lanes = max(t.models[i].lanes, m.lanes)
						}
					}
				}
			}
		}
	}
	for _, b := range e.local.backends {
		if t := top[b.spec.name]; t != nil {
			b.spec = *t
		}
	}
}

func sameLanes(a, b stateDoc) bool {
	if a.MaxRunning != b.MaxRunning || a.MaxAdmitted != b.MaxAdmitted || len(a.Providers) != len(b.Providers) {
		return false
	}
	for i := range a.Providers {
		if a.Providers[i].Name != b.Providers[i].Name || a.Providers[i].Lanes != b.Providers[i].Lanes {
			return false
		}
	}
	return true
}
