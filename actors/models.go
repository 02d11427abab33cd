package actors

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tollgate/tollgate/actors/policy"
	"github.com/tollgate/tollgate/providers/llm"
)

// modelTable is what the gateway serves: the routes from client-facing ids, the model cards
// and each provider's models by index (the index the gate and the lane actors use). A
// published table is never changed; AddModels publishes a grown copy (copy-on-write), so
// Start and Models read it with one atomic load and take no lock.
type modelTable struct {
	routes    map[string]route
	wildcards []wildcard      // alias patterns, longest prefix first (aliases.go)
	cards     []llm.ModelCard // sorted by id
	models    [][]Model       // [provider][model index]
}

// newModelTable builds the table of the configured models.
func newModelTable(o *Options) *modelTable {
	t := &modelTable{routes: map[string]route{}, models: make([][]Model, len(o.Providers))}
	for p, pv := range o.Providers {
		t.add(p, pv, pv.Models)
		for _, a := range pv.Aliases {
			t.wildcards = append(t.wildcards, wildcard{prefix: strings.TrimSuffix(a, "*"), target: pv.Name + "/*"})
		}
	}
	t.sortCards()
	sortWildcards(t.wildcards)
	return t
}

// add appends models to provider p's list, routes and cards. A model or alias whose id is
// already routed is the caller's to filter out; add would overwrite its route.
func (t *modelTable) add(p int, pv Provider, models []Model) {
	for _, mv := range models {
		m := len(t.models[p])
		t.models[p] = append(t.models[p], mv)
		id := pv.Name + "/" + mv.Name
		r := route{p: p, m: m, provider: pv.Name, model: mv.Name, id: id, backend: pv.Backend, timeout: pv.RunTimeout}
		t.routes[id] = r
		for _, a := range mv.Aliases {
			if isWildcard(a) {
				t.wildcards = append(t.wildcards, wildcard{prefix: strings.TrimSuffix(a, "*"), target: id})
				continue
			}
			t.routes[a] = r
		}
		t.cards = append(t.cards, cardOf(pv, mv, id))
	}
}

func (t *modelTable) sortCards() {
	sort.Slice(t.cards, func(i, j int) bool { return t.cards[i].ID < t.cards[j].ID })
}

// clone copies the table deeply enough that adding to the copy leaves t untouched.
func (t *modelTable) clone() *modelTable {
	c := &modelTable{routes: make(map[string]route, len(t.routes)+8), models: make([][]Model, len(t.models))}
	for k, v := range t.routes {
		c.routes[k] = v
	}
	c.cards = append(make([]llm.ModelCard, 0, len(t.cards)+8), t.cards...)
	c.wildcards = append([]wildcard(nil), t.wildcards...)
	for p, ms := range t.models {
		c.models[p] = append(make([]Model, 0, len(ms)+1), ms...)
	}
	return c
}

// cardOf is model mv's card: its own knowledge plus what the gateway decides about it.
func cardOf(pv Provider, mv Model, id string) llm.ModelCard {
	card := mv.Card
	card.Provider, card.Kind = pv.Name, pv.Kind
	card.Lanes, card.ModelLanes = pv.Lanes, mv.Lanes
	card.RunTimeoutMs = pv.RunTimeout.Milliseconds()
	if card.PriorityDefault == "" {
		card.PriorityDefault = llm.Interactive.String()
	}
	if card.Fallbacks == nil {
		card.Fallbacks = []string{}
	}
	return llm.ModelCard{ID: id, Object: "model", OwnedBy: pv.Name, Spec: card}
}

// model returns model m of provider p as currently served.
func (g *Gateway) model(p, m int) Model { return g.table.Load().models[p][m] }

// addModelsTimeout bounds AddModels' wait for the supervisor, which answers at once unless
// the actor system is gone.
const addModelsTimeout = 10 * time.Second

// AddModels adds models a backend reported to provider while the gateway runs: they get
// routes, cards, lanes in the gate and a lane actor, and serve at once. A model whose id
// ("provider/Name") is already served is skipped, as is an alias already taken, so the
// configuration always wins. Models are never removed: one that disappears from a
// backend's list keeps its route and lanes until restart (its calls then fail as the
// backend says), because removing it would have to answer its queued and running calls.
// Requests already admitted are not disturbed.
func (g *Gateway) AddModels(provider string, models []Model) error {
	p := -1
	for i, pv := range g.opts.Providers {
		if pv.Name == provider {
			p = i
		}
	}
	if p < 0 {
		return fmt.Errorf("add models: no provider %q", provider)
	}
	var errs []error
	for _, m := range models {
		if m.Name == "" || m.Lanes < 1 {
			errs = append(errs, fmt.Errorf("add models: provider %q: model %q: needs a name and model_lanes ≥ 1", provider, m.Name))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if len(models) == 0 {
		return nil
	}
	res, err := g.system.Root.RequestFuture(g.supervisor, &addModels{p: p, models: models}, addModelsTimeout).Result()
	if err != nil {
		return fmt.Errorf("add models to %q: the gateway did not answer: %w", provider, err)
	}
	if e, ok := res.(*addModelsDone); ok && e.err != nil {
		return fmt.Errorf("add models to %q: %w", provider, e.err)
	}
	return nil
}

// addModels, from Gateway.AddModels to the supervisor, which answers an *addModelsDone.
type addModels struct {
	p      int
	models []Model
}

type addModelsDone struct{ err error }

// addLanes, from the supervisor to a provider actor: provider's models grew to n, spawn
// the lane actors it lacks.
type addLanes struct{ n int }

// grow adds models to the gate and the model table together, so a model's index is the same
// in both, then publishes the table and has the provider actor spawn the new lanes. A
// call for a new model can only reach the provider actor after addLanes: both are sent by
// the supervisor, in that order.
func (s *supervisor) grow(ctx actor.Context, msg *addModels) error {
	if !s.alive {
		return errors.New("the gateway is shutting down")
	}
	pv := s.g.opts.Providers[msg.p]
	old := s.g.table.Load()
	var fresh []Model
	seen := map[string]bool{}
	for _, m := range msg.models {
		id := pv.Name + "/" + m.Name
		if _, dup := old.routes[id]; dup || seen[id] {
			continue
		}
		seen[id] = true
		aliases := m.Aliases[:0:0]
		for _, a := range m.Aliases {
			if _, taken := old.routes[a]; !taken && !seen[a] {
				aliases = append(aliases, a)
				seen[a] = true
			}
		}
		m.Aliases = aliases
		fresh = append(fresh, m)
	}
	if len(fresh) == 0 {
		return nil
	}
	t := old.clone()
	for _, m := range fresh {
		want := len(t.models[msg.p])
		if got := s.gate.AddModel(msg.p, policy.ModelSpec{Name: m.Name, Lanes: m.Lanes}); got != want {
			// The gate and the table grow only here, together: a mismatch is a bug, and
			// publishing would route calls to the wrong lanes.
			return fmt.Errorf("internal fault: gate added model %s/%s at %d, table at %d", pv.Name, m.Name, got, want)
		}
		t.add(msg.p, pv, []Model{m})
	}
	t.sortCards()
	sortWildcards(t.wildcards)
	s.g.table.Store(t)
	ctx.Send(s.providers[msg.p], &addLanes{n: len(t.models[msg.p])})
	s.g.log.Info().Str("provider", pv.Name).Int("added", len(fresh)).Int("models", len(t.models[msg.p])).
		Msg("models added at runtime")
	return nil
}

// spawnLanes spawns lane actors until the provider has one per model in [0, n), and tells
// the supervisor the lanes it now has.
func (a *providerActor) spawnLanes(ctx actor.Context, n int) {
	for m := len(a.lanes); m < n; m++ {
		props := actor.PropsFromProducer(newLaneProducer(a.g, a.p, m, ctx.Self()),
			actor.WithSupervisor(requestStrategy()), actor.WithDispatcher(a.g.dispatch))
		a.lanes = append(a.lanes, ctx.Spawn(props))
	}
	ctx.Send(a.parent, &lanesReady{p: a.p, from: ctx.Self(), lanes: append([]*actor.PID(nil), a.lanes...)})
}
