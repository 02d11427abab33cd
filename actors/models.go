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
	routepkg "github.com/tollgate/tollgate/providers/route"
)

// modelTable is what the gateway serves: the routes from client-facing ids, the model cards
// and each provider's models by index (the index the gate and the lane actors use). A
// published table is never changed; AddModels and Reconfigure publish a new one
// (copy-on-write), so Start and Models read it with one atomic load and take no lock.
type modelTable struct {
	routes    map[string]route
	wildcards []wildcard      // alias patterns, longest prefix first (aliases.go)
	cards     []llm.ModelCard // sorted by id
	// provs are the providers by slot with the settings in force, and models their models
	// by index. A provider or model a reload removed keeps its slot and index (never
	// reused) but has no route.
	provs  []servedProvider
	models [][]Model // [provider][model index]
	// picks are the routes of SPEC §12 by name: model ids that pick a model per request.
	picks map[string]*routepkg.Route
}

// servedProvider is one provider slot of the table.
type servedProvider struct {
	Provider // the settings in force; its Models field is not used (see modelTable.models)
	slot     *slot
	live     bool   // false once a reload removed it
	gone     []bool // per model index: removed by a reload
}

// newModelTable builds the table of the configured models and routes.
func newModelTable(o *Options, slots []*slot) *modelTable {
	provs := make([]servedProvider, len(o.Providers))
	models := make([][]Model, len(o.Providers))
	for p, pv := range o.Providers {
		provs[p] = servedProvider{Provider: pv, slot: slots[p], live: true, gone: make([]bool, len(pv.Models))}
		models[p] = pv.Models
	}
	return buildTable(provs, models, o.Routes)
}

// buildTable routes every live model of every live provider, and the routes of SPEC §12.
func buildTable(provs []servedProvider, models [][]Model, routes []*routepkg.Route) *modelTable {
	t := &modelTable{routes: map[string]route{}, provs: provs, models: make([][]Model, len(provs)),
		picks: map[string]*routepkg.Route{}}
	for p, sp := range provs {
		t.models[p] = append([]Model(nil), models[p]...)
		if !sp.live {
			continue
		}
		for m, mv := range t.models[p] {
			if !sp.gone[m] {
				t.route(p, m, mv)
			}
		}
		for _, a := range sp.Aliases {
			t.wildcards = append(t.wildcards, wildcard{prefix: strings.TrimSuffix(a, "*"), target: sp.Name + "/*"})
		}
	}
	for _, rr := range routes {
		t.picks[rr.Name()] = rr
		t.cards = append(t.cards, llm.ModelCard{ID: rr.Name(), Object: "model", OwnedBy: "tollgate",
			Spec: llm.Spec{Kind: "route", Route: true, Candidates: rr.Models(), Fallbacks: []string{}}})
	}
	t.sortCards()
	sortWildcards(t.wildcards)
	return t
}

// resolve is the route of a client's model name: a routed name picks its model for req
// first (SPEC §12), then ids and aliases lead where lookup says.
func (t *modelTable) resolve(name string, req *llm.Request) (route, bool) {
	if rr, ok := t.picks[name]; ok {
		name, _ = rr.Pick(req, req.Task)
	}
	return t.lookup(name)
}

// add appends models to provider p's list, routes and cards. A model or alias whose id is
// already routed is the caller's to filter out; add would overwrite its route.
func (t *modelTable) add(p int, models []Model) {
	for _, mv := range models {
		t.models[p] = append(t.models[p], mv)
		t.provs[p].gone = append(t.provs[p].gone, false)
		t.route(p, len(t.models[p])-1, mv)
	}
}

// route makes the route, aliases and card of model m of provider p.
func (t *modelTable) route(p, m int, mv Model) {
	pv := &t.provs[p]
	id := pv.Name + "/" + mv.Name
	r := route{p: p, m: m, slot: pv.slot, provider: pv.Name, kind: pv.Kind, typ: mv.Card.ModelType(), model: mv.Name, id: id, backend: pv.Backend, timeout: pv.RunTimeout, queueTimeout: pv.QueueTimeout,
		fallback: mv.Fallbacks, on: mv.FallbackOn, counts: pv.RateLimit.TPM > 0 || pv.KeyRateLimit.TPM > 0}
	r.keyed, _ = pv.Backend.(llm.KeyedBackend)
	if mv.Card.ContextWindow != nil {
		r.window = *mv.Card.ContextWindow
	}
	if r.on == 0 {
		r.on = OnRateLimited | OnUnavailable | OnQueueFull | OnQueueTimeout
	}
	t.routes[id] = r
	for _, a := range mv.Aliases {
		if isWildcard(a) {
			t.wildcards = append(t.wildcards, wildcard{prefix: strings.TrimSuffix(a, "*"), target: id})
			continue
		}
		t.routes[a] = r
	}
	t.cards = append(t.cards, cardOf(pv.Provider, mv, id))
}

func (t *modelTable) sortCards() {
	sort.Slice(t.cards, func(i, j int) bool { return t.cards[i].ID < t.cards[j].ID })
}

// clone copies the table deeply enough that adding to the copy leaves t untouched.
func (t *modelTable) clone() *modelTable {
	c := &modelTable{routes: make(map[string]route, len(t.routes)+8), models: make([][]Model, len(t.models)), picks: t.picks,
		provs: append([]servedProvider(nil), t.provs...)}
	for k, v := range t.routes {
		c.routes[k] = v
	}
	c.cards = append(make([]llm.ModelCard, 0, len(t.cards)+8), t.cards...)
	c.wildcards = append([]wildcard(nil), t.wildcards...)
	for p, ms := range t.models {
		c.models[p] = append(make([]Model, 0, len(ms)+1), ms...)
		c.provs[p].gone = append([]bool(nil), t.provs[p].gone...)
	}
	return c
}

// cardOf is model mv's card: its own knowledge plus what the gateway decides about it.
func cardOf(pv Provider, mv Model, id string) llm.ModelCard {
	card := mv.Card
	card.Provider, card.Kind, card.Type = pv.Name, pv.Kind, mv.Card.ModelType()
	card.Lanes, card.ModelLanes = pv.Lanes, mv.Lanes
	card.RunTimeoutMs = pv.RunTimeout.Milliseconds()
	if card.PriorityDefault == "" {
		card.PriorityDefault = llm.Interactive.String()
	}
	if card.Fallbacks == nil {
		card.Fallbacks = mv.Fallbacks
	}
	if card.Fallbacks == nil {
		card.Fallbacks = []string{}
	}
	return llm.ModelCard{ID: id, Object: "model", OwnedBy: pv.Name, Spec: card}
}

// model returns model m of provider p as currently served.
func (t *modelTable) model(p, m int) Model { return t.models[p][m] }

// addModelsTimeout bounds AddModels' wait for the provider actor, which answers at once
// unless it is out of service or the actor system is gone.
const addModelsTimeout = 10 * time.Second

// AddModels adds models a backend reported to provider while the gateway runs: they get
// routes, cards, lanes in the provider's policy and a lane actor, and serve at once. A model
// whose id ("provider/Name") is already served is skipped, as is an alias already taken, so
// the configuration always wins. Models are never removed: one that disappears from a
// backend's list keeps its route and lanes until restart (its calls then fail as the
// backend says), because removing it would have to answer its queued and running calls.
// Requests already admitted are not disturbed.
func (g *Gateway) AddModels(provider string, models []Model) error {
	p := g.table.Load().providerIndex(provider)
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
	g.changeMu.Lock()
	defer g.changeMu.Unlock()
	if p = g.table.Load().providerIndex(provider); p < 0 { // a reload may have removed it meanwhile
		return fmt.Errorf("add models: no provider %q", provider)
	}
	reply := make(chan error, 1)
	send(g.system.Root, g.slots.at(p).pid.Load(), &addModel{models: models, reply: reply})
	t := time.NewTimer(addModelsTimeout)
	defer t.Stop()
	select {
	case err := <-reply:
		if err != nil {
			return fmt.Errorf("add models to %q: %w", provider, err)
		}
		return nil
	case <-g.stopped:
		return fmt.Errorf("add models to %q: the gateway has stopped", provider)
	case <-t.C:
		return fmt.Errorf("add models to %q: the provider did not answer within %s", provider, addModelsTimeout)
	}
}

// addModel, from Gateway.AddModels to a provider actor, which answers on reply.
type addModel struct {
	models []Model
	reply  chan error
}

// addModel adds models to the provider's policy and to the model table together, so that a
// model's index is the same in both, spawns their lane actors, and publishes the table. A
// call for a new model can only come once the table is published, after its lane exists.
func (pr providerReload) addModel(ctx actor.Context, m *addModel) {
	m.reply <- pr.grow(ctx, m.models)
}

func (pr providerReload) grow(ctx actor.Context, models []Model) error {
	a := pr.a
	if a.draining {
		return errors.New("the gateway is shutting down")
	}
	g := a.g
	g.tableMu.Lock()
	defer g.tableMu.Unlock()
	pv := a.pv
	old := g.table.Load()
	var fresh []Model
	seen := map[string]bool{}
	for _, m := range models {
		id := pv.Name + "/" + m.Name
		if _, dup := old.routes[id]; dup || seen[id] {
			continue
		}
		seen[id] = true
		aliases := m.Aliases[:0:0]
		for _, al := range m.Aliases {
			if _, taken := old.routes[al]; !taken && !seen[al] {
				aliases = append(aliases, al)
				seen[al] = true
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
		want := len(t.models[a.p])
		if got := a.pol.AddModel(policy.ModelSpec{Name: m.Name, Lanes: m.Lanes}); got != want {
			// The policy and the table grow only here, together: a mismatch is a bug, and
			// publishing would route calls to the wrong lanes.
			return fmt.Errorf("internal fault: the policy added model %s/%s at %d, the table at %d", pv.Name, m.Name, got, want)
		}
		t.add(a.p, []Model{m})
		a.models = append(a.models, m)
		a.gone = append(a.gone, false)
		a.spawnLane(ctx, want)
	}
	t.sortCards()
	sortWildcards(t.wildcards)
	g.table.Store(t)
	g.log.Info().Str("provider", pv.Name).Int("added", len(fresh)).Int("models", len(t.models[a.p])).
		Msg("models added at runtime")
	return nil
}
