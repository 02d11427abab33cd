package app

import (
	"context"
	"sync"
	"time"

	"github.com/tollgate/tollgate/actors"
	"github.com/tollgate/tollgate/cmd/internal/config"
	"github.com/tollgate/tollgate/providers/catalog"
	"github.com/tollgate/tollgate/providers/llm"
)

// Model discovery. An HTTP provider's served models are its configured ones merged with
// the backend's own list, read at start and then every refresh_models. The configuration
// wins for lanes and for every card value it sets; a card value it leaves out comes from
// the backend's list, else from the catalog of well-known models, else stays null. Models
// are only ever added: one that disappears from the backend's list keeps serving (and
// failing as the backend says) until restart, see actors.Gateway.AddModels.

// lister is a provider whose backend can list its models.
type lister struct {
	p       *config.Provider
	backend llm.ModelLister
	failed  bool // the listing at start failed
}

// listers returns the providers whose models are discovered: HTTP kinds whose backend
// can list them. CLI and fake kinds list exactly what they were configured with.
func listers(cfg *config.Config, backends []llm.Backend) []*lister {
	var out []*lister
	for i := range cfg.Providers {
		p := &cfg.Providers[i]
		if ml, ok := backends[i].(llm.ModelLister); ok && config.IsHTTP(p.Kind) {
			out = append(out, &lister{p: p, backend: ml})
		}
	}
	return out
}

// list reads the backend's models within timeout. A failure is logged and gives no
// models: the provider still serves its configured ones.
func (l *lister) list(ctx context.Context, timeout time.Duration, o Options) ([]llm.ModelInfo, bool) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	infos, err := l.backend.ListModels(ctx)
	if err != nil {
		o.Logger.Warn().Str("provider", l.p.Name).Err(err).Msg("could not list the backend's models")
		return nil, false
	}
	return infos, true
}

// listAll lists every lister's models at once, so start-up waits one timeout at most. A
// lister whose listing failed is marked failed.
func listAll(ctx context.Context, ls []*lister, o Options) map[*config.Provider][]llm.ModelInfo {
	out := make(map[*config.Provider][]llm.ModelInfo, len(ls))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, l := range ls {
		wg.Go(func() { // exits when ListModels returns, bounded by DiscoveryTimeout
			infos, ok := l.list(ctx, o.DiscoveryTimeout, o)
			if ok {
				o.Logger.Info().Str("provider", l.p.Name).Int("listed", len(infos)).Int("configured", len(l.p.Models)).
					Msg("listed the backend's models")
			}
			l.failed = !ok
			mu.Lock()
			out[l.p] = infos
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// mergeModels is provider p's models: the configured ones in their order, then those only
// the backend lists, in its order.
func mergeModels(p *config.Provider, listed []llm.ModelInfo) []actors.Model {
	info := make(map[string]llm.ModelInfo, len(listed))
	for _, in := range listed {
		info[in.ID] = in
	}
	models := make([]actors.Model, 0, len(p.Models)+len(listed))
	configured := make(map[string]bool, len(p.Models))
	for i := range p.Models {
		m := &p.Models[i]
		configured[m.ID] = true
		lanes := m.ModelLanes
		if lanes <= 0 {
			lanes = p.ModelLanes
		}
		card := llm.Spec{Type: m.Type, ContextWindow: m.ContextWindow, MaxOutputTokens: m.MaxOutputTokens,
			Reasoning: m.Reasoning, Tools: m.Tools, Vision: m.Vision, Fallbacks: m.Fallbacks}
		models = append(models, actors.Model{Name: m.ID, Aliases: m.Aliases, Lanes: lanes,
			Card: fillCard(card, info[m.ID], m.ID), OwnKeys: len(m.Keys) > 0, KeyIDs: fingerprints(m.Keys),
			Fallbacks: m.Fallbacks, FallbackOn: fallbackOn(m.FallbackOn)})
	}
	return append(models, discovered(p, listed, configured)...)
}

// fallbackOn turns a model's fallback_on names into the gateway's set.
func fallbackOn(names []string) actors.FallbackOn {
	var on actors.FallbackOn
	for _, n := range names {
		switch n {
		case config.FallbackRateLimited:
			on |= actors.OnRateLimited
		case config.FallbackUnavailable:
			on |= actors.OnUnavailable
		case config.FallbackQueueFull:
			on |= actors.OnQueueFull
		case config.FallbackQueueTimeout:
			on |= actors.OnQueueTimeout
		}
	}
	return on
}

// discovered turns the listed models not in known into models with the provider's
// default model lanes, marking them known.
func discovered(p *config.Provider, listed []llm.ModelInfo, known map[string]bool) []actors.Model {
	var out []actors.Model
	for _, in := range listed {
		if in.ID == "" || known[in.ID] {
			continue
		}
		known[in.ID] = true
		out = append(out, actors.Model{Name: in.ID, Lanes: p.ModelLanes, Card: fillCard(llm.Spec{}, in, in.ID)})
	}
	return out
}

// fillCard completes a card whose set values came from the configuration: the backend's
// type and numbers next (a model configured without a type that the backend lists as an
// embedding model is one), then the catalog's.
func fillCard(s llm.Spec, in llm.ModelInfo, model string) llm.Spec {
	if s.Type == "" {
		s.Type = in.Type
	}
	if s.ContextWindow == nil && in.ContextWindow > 0 {
		v := in.ContextWindow
		s.ContextWindow = &v
	}
	if s.MaxOutputTokens == nil && in.MaxOutputTokens > 0 {
		v := in.MaxOutputTokens
		s.MaxOutputTokens = &v
	}
	catalog.Fill(&s, model)
	return s
}

// refresher re-reads the backends' model lists and adds what is new to the gateway.
type refresher struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startRefresh starts one goroutine per lister with a refresh interval, or whose listing at
// start failed while it has no configured model (it would serve nothing until it lists).
// known holds, per provider, the model ids served at start; each goroutine owns its
// provider's set.
func startRefresh(g *actors.Gateway, ls []*lister, known map[*config.Provider]map[string]bool, o Options) *refresher {
	ctx, cancel := context.WithCancel(context.Background())
	r := &refresher{cancel: cancel}
	for _, l := range ls {
		pending := l.failed && len(l.p.Models) == 0
		if l.p.RefreshModels.D() <= 0 && !pending {
			continue // 0: read once at start
		}
		r.wg.Go(func() { l.refreshLoop(ctx, g, known[l.p], o, pending) }) // exits when stop cancels ctx
	}
	return r
}

// Listing again a backend that serves nothing yet: the first wait, doubled after every
// failure up to the cap.
const (
	defaultListRetry = time.Second
	maxListRetry     = time.Minute
)

// stop ends the refresh goroutines and waits for them; safe to call more than once.
func (r *refresher) stop() {
	r.cancel()
	r.wg.Wait()
}

// refreshLoop re-reads the backend's model list every refresh_models and adds what is new.
// pending says the listing at start failed for a provider that serves nothing else: until
// it answers, it is read again with backoff (o.ListRetry, doubling up to maxListRetry).
func (l *lister) refreshLoop(ctx context.Context, g *actors.Gateway, known map[string]bool, o Options, pending bool) {
	wait := o.ListRetry
	if wait <= 0 {
		wait = defaultListRetry
	}
	for pending {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if l.refresh(ctx, g, known, o) {
			break
		}
		wait = min(2*wait, maxListRetry)
		o.Logger.Warn().Str("provider", l.p.Name).Dur("next_try_in", wait).Msg("listing the backend's models failed again; the provider serves none until a listing answers")
	}
	if l.p.RefreshModels.D() <= 0 {
		return
	}
	t := time.NewTicker(l.p.RefreshModels.D())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		l.refresh(ctx, g, known, o)
	}
}

// refresh lists the backend's models once and adds what is new to the gateway. It reports
// whether the listing answered.
func (l *lister) refresh(ctx context.Context, g *actors.Gateway, known map[string]bool, o Options) bool {
	infos, ok := l.list(ctx, o.DiscoveryTimeout, o)
	if !ok {
		return false
	}
	fresh := discovered(l.p, infos, known)
	if len(fresh) == 0 {
		return true
	}
	if err := g.AddModels(l.p.Name, fresh); err != nil {
		o.Logger.Warn().Str("provider", l.p.Name).Err(err).Msg("could not add the backend's new models")
		for _, m := range fresh {
			delete(known, m.Name) // try again next time
		}
		return true
	}
	o.Logger.Info().Str("provider", l.p.Name).Int("added", len(fresh)).Msg("the backend lists new models")
	return true
}
