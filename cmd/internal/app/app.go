// Package app wires a validated configuration into a running gateway: adapters, the actor
// system and the HTTP handler. cmd/tollgate, the load harness and the end-to-end tests all
// build the gateway this one way.
package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/actors"
	"github.com/tollgate/tollgate/actors/policy/affinity"
	"github.com/tollgate/tollgate/actors/policy/breaker"
	"github.com/tollgate/tollgate/cmd/internal/config"
	"github.com/tollgate/tollgate/cmd/internal/serve"
	"github.com/tollgate/tollgate/cmd/internal/store"
	"github.com/tollgate/tollgate/cmd/internal/telemetry"
	"github.com/tollgate/tollgate/httpapi"
	"github.com/tollgate/tollgate/httpapi/guard"
	"github.com/tollgate/tollgate/providers/llm"
)

// The optional capabilities httpapi finds on its Gateway by type assertion.
var (
	_ httpapi.BatchGateway  = (*actors.Gateway)(nil)
	_ httpapi.ModelResolver = (*actors.Gateway)(nil)
)

// App is a wired gateway.
type App struct {
	Gateway *actors.Gateway
	Handler http.Handler
	Metrics *telemetry.Metrics // served at GET /metrics
	log     zerolog.Logger
	opts    Options
	server  *httpapi.Server

	// mu guards what a reload replaces (reload.go): the config in force, the adapters by
	// provider name (reused while their settings stay) and the model refreshes.
	mu       sync.Mutex
	config   *config.Config
	backends map[string]builtBackend
	refresh  *refresher
	drained  bool // Drain has begun: no reload starts refreshes again

	shared *shared                           // the replicas' shared state (cluster.go); nil: alone
	store  *store.Store                      // run-time client keys and the spend ledger (clients.go); nil: none
	spend  *sharedSpend                      // the store's spend shared by the replicas (sharedspend.go); nil: alone or no store
	keys   *keySync                          // the run-time keys read again from a shared store (keysync.go); nil: none
	prices atomic.Pointer[prices]            // what each model costs (clients.go), per config
	kinds  atomic.Pointer[map[string]string] // each provider's kind, for discovered models' prices
}

// Options tune New beyond the configuration. Zero values are fine.
type Options struct {
	Logger zerolog.Logger
	// Backends, when it has an entry for a provider name, replaces the adapter the
	// configuration would build (tests inject instrumented backends this way).
	Backends map[string]llm.Backend
	// DiscoveryTimeout bounds each reading of an HTTP backend's model list, at start and
	// at every refresh; 0 → 5s.
	DiscoveryTimeout time.Duration
	// ListRetry is the first wait before listing again the models of a backend whose
	// listing failed at start while it has no configured model; it doubles after every
	// failure, up to a minute. 0 → 1s.
	ListRetry time.Duration
	// Tracer, when set, traces every model request and backend attempt (telemetry.Tracing);
	// TraceContent puts prompts into those spans. Nil: no tracing.
	Tracer       trace.Tracer
	TraceContent bool
	// NoMetrics leaves request counting and GET /metrics out: the relay benchmark's
	// baseline for what counting costs (docs/benchmarks.md). False, the zero value, counts.
	NoMetrics bool
	// Reload, when set, reads the configuration again for SIGHUP and POST /admin/reload
	// (App.Reload); nil: POST /admin/reload answers that there is no file to re-read.
	Reload func() (*config.Config, error)
	// StateDir, when set, holds the default store's SQLite file (tollgate.db) for a
	// configuration that needs a store and names none; empty: the user's state directory
	// (store.DefaultPath). Tests and the load harness give each gateway its own.
	StateDir string
}

// New builds the adapters, merges each HTTP provider's configured models with the
// backend's own list, starts the actor system and the model list refreshes (see
// models.go). Drain stops the refreshes.
func New(ctx context.Context, cfg *config.Config, o Options) (*App, error) {
	if o.DiscoveryTimeout <= 0 {
		o.DiscoveryTimeout = 5 * time.Second
	}
	a := &App{log: o.Logger, opts: o}
	// The Host and Origin check (httpapi/guard); config validation has checked its entries.
	origins, err := guard.New(cfg.Listen, cfg.Auth.AllowedHosts, cfg.Auth.AllowedOrigins)
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	b, err := a.build(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := a.startGateway(ctx, cfg, b); err != nil {
		return nil, err
	}
	a.setPrices(cfg) // the store prices every recorded call
	if err := a.attachStore(ctx, cfg); err != nil {
		_ = a.Gateway.Shutdown(context.Background())
		if a.shared != nil {
			_ = a.shared.e.Close()
		}
		return nil, err
	}
	a.server = httpapi.New(a.httpOptions(cfg, origins))
	a.Handler = a.server
	a.config, a.backends = cfg, b.backends
	a.refresh = startRefresh(a.Gateway, b.listers, b.known, o)
	return a, nil
}

// startGateway starts the actor system on what build made, with the metrics it reports to
// and, with cluster:, the replica engine; it sets a.Gateway and a.Metrics.
func (a *App) startGateway(ctx context.Context, cfg *config.Config, b *built) error {
	// The metrics exist before the gateway, which tells them of retries, fallbacks, breakers
	// and learned lanes; they read its state at each scrape, which only comes once it runs.
	var g *actors.Gateway
	var m *telemetry.Metrics
	if !a.opts.NoMetrics {
		m = telemetry.NewMetrics(series(cfg), func() actors.AdminState { return g.State() })
		b.gopts.Observer = m
	}
	if cfg.Cluster != nil {
		var err error
		if a.shared, err = newShared(ctx, cfg, a.log); err != nil {
			return err
		}
		b.gopts.Shared = a.shared.e
	}
	g, err := actors.New(b.gopts)
	if err != nil {
		if a.shared != nil {
			_ = a.shared.e.Close()
		}
		return fmt.Errorf("start gateway: %w", err)
	}
	if a.shared != nil {
		a.shared.setGateway(g)
		if m != nil {
			m.Register(a.shared.e.Collector())
		}
	}
	a.Gateway, a.Metrics = g, m
	return nil
}

// attachStore opens the store the configuration needs (storeOptional says when failing to
// is only a warning).
func (a *App) attachStore(ctx context.Context, cfg *config.Config) error {
	if !wantsStore(cfg) {
		return nil
	}
	st, err := a.openStore(ctx, cfg)
	switch {
	case err == nil:
		a.store = st
		if st.Shared() {
			a.keys = startKeySync(st, a.Gateway, keysRefreshEvery, a.log)
		}
		if a.shared != nil {
			a.spend = newSharedSpend(st, a.shared.e, cfg.Cluster.LeaseTTL.D(), a.log)
		}
	case storeOptional(cfg):
		a.log.Warn().Err(err).Msg("no store for the embedded default: run-time keys and the spend ledger are off")
	default:
		return err
	}
	return nil
}

// httpOptions are the HTTP layer's options for cfg, over the running gateway.
func (a *App) httpOptions(cfg *config.Config, origins *guard.Policy) httpapi.Options {
	g, m, o := a.Gateway, a.Metrics, a.opts
	ho := httpapi.Options{Origins: origins,
		Gateway: g, State: func() any { return g.State() }, MaxBodyBytes: cfg.Limits.MaxBodyBytes,
		BodyTimeout: cfg.Limits.BodyTimeout.D(), MaxHeaderBytes: cfg.Limits.MaxHeaderBytes,
		WriteTimeout: cfg.Limits.WriteTimeout.D(),
		Clients:      clientKeys(cfg.Auth.APIKeys), AdminKeys: cfg.Auth.AdminKeys, Logger: o.Logger,
		Tenants:       a.tenants(),
		MetricsPublic: cfg.Metrics.Public, Tracer: o.Tracer, TraceContent: o.TraceContent, Reload: a.reloadRequest,
	}
	if m != nil {
		ho.Metrics, ho.Observe = m.Handler(), m.Observe
	}
	return ho
}

// Config is the configuration in force: New's, or the last reload's.
func (a *App) Config() *config.Config {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.config
}

// built is what build makes of a configuration.
type built struct {
	gopts    actors.Options
	backends map[string]builtBackend
	listers  []*lister
	known    map[*config.Provider]map[string]bool
}

// builtBackend is one provider's adapter and the settings it was built from.
type builtBackend struct {
	backend llm.Backend // as the gateway calls it (traced when tracing is on)
	lister  llm.Backend // the adapter itself, for model listing
	sig     backendSig
}

// build makes the gateway's options from cfg: the adapters (reusing a.backends' adapter of
// a provider whose adapter settings stay), each HTTP provider's models merged with the
// backend's own list, and the routes.
func (a *App) build(ctx context.Context, cfg *config.Config) (*built, error) {
	o := a.opts
	b := &built{backends: map[string]builtBackend{}, known: map[*config.Provider]map[string]bool{},
		gopts: actors.Options{MaxRunning: cfg.Limits.MaxRunning, MaxAdmitted: cfg.Limits.MaxAdmitted,
			RetryAfter: cfg.Limits.RetryAfter.D(), Logger: o.Logger, Affinity: affinityOf(&cfg.Limits)}}
	adapters := make([]llm.Backend, len(cfg.Providers))
	var errs []error
	for i := range cfg.Providers {
		p := &cfg.Providers[i]
		sig := signature(p, &cfg.Limits)
		if old, ok := a.backends[p.Name]; ok && old.sig.equal(sig) {
			b.backends[p.Name], adapters[i] = old, old.lister
			continue
		}
		ad, ok := o.Backends[p.Name]
		if !ok {
			var err error
			if ad, err = backendFor(p, &cfg.Limits, o.Logger); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		bb := builtBackend{backend: ad, lister: ad, sig: sig}
		if o.Tracer != nil {
			bb.backend = telemetry.TraceBackend(ad, o.Tracer, p.Name, p.Kind)
		}
		b.backends[p.Name], adapters[i] = bb, ad
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	b.listers = listers(cfg, adapters)
	listed := listAll(ctx, b.listers, o)
	failed := map[*config.Provider]bool{}
	for _, l := range b.listers {
		failed[l.p] = l.failed
	}
	for i := range cfg.Providers {
		p := &cfg.Providers[i]
		models := mergeModels(p, listed[p])
		if failed[p] && a.Gateway != nil {
			// A reload whose listing failed keeps the models the backend listed before: a
			// transient failure must not remove them (and answer their clients 404).
			models = append(models, a.stillListed(p, models)...)
		}
		b.known[p] = make(map[string]bool, len(models))
		for _, m := range models {
			b.known[p][m.Name] = true
		}
		b.gopts.Providers = append(b.gopts.Providers, toProvider(p, &cfg.Limits, models, b.backends[p.Name].backend))
	}
	for i := range cfg.Routes {
		rr, err := cfg.Routes[i].Compile()
		if err != nil {
			return nil, fmt.Errorf("route %q: %w", cfg.Routes[i].Name, err) // a validated config's routes compile
		}
		b.gopts.Routes = append(b.gopts.Routes, rr)
	}
	return b, nil
}

// series is what the metrics must know of cfg: its providers, and its fallback pairs with
// aliases resolved to model ids.
func series(cfg *config.Config) telemetry.Series {
	var s telemetry.Series
	alias := map[string]string{}
	for i := range cfg.Providers {
		p := &cfg.Providers[i]
		s.Providers = append(s.Providers, p.Name)
		for j := range p.Models {
			for _, a := range p.Models[j].Aliases {
				alias[a] = p.ModelID(&p.Models[j])
			}
		}
	}
	for i := range cfg.Providers {
		p := &cfg.Providers[i]
		for j := range p.Models {
			for _, to := range p.Models[j].Fallbacks {
				if id, ok := alias[to]; ok {
					to = id
				}
				s.Fallbacks = append(s.Fallbacks, [2]string{p.ModelID(&p.Models[j]), to})
			}
		}
	}
	return s
}

// Server returns the HTTP server the gateway is served with: Handler behind the
// configuration's header, idle and per-client connection limits (cmd/internal/serve).
func (a *App) Server() *serve.Server {
	l := &a.Config().Limits
	return serve.New(a.Handler, serve.Limits{
		HeaderTimeout: l.HeaderTimeout.D(), IdleTimeout: l.IdleTimeout.D(),
		MaxHeaderBytes: l.MaxHeaderBytes, MaxConnsPerClient: l.MaxConnsPerClient,
	}, a.log)
}

func toProvider(p *config.Provider, l *config.Limits, models []actors.Model, b llm.Backend) actors.Provider {
	ap := actors.Provider{
		Name: p.Name, Kind: p.Kind, Backend: b, Lanes: p.Lanes, QueueLength: p.QueueLength,
		QueueTimeout: p.QueueTimeout.D(), RunTimeout: p.RunTimeout.D(), Models: models, Aliases: p.Aliases,
		Keys: len(p.Keys), KeyIDs: fingerprints(p.Keys), KeyCooldown: p.KeyCooldown.D(), MaxKeyCooldown: p.MaxKeyCooldown.D(),
		Retries: p.Retries, MaxRetryWait: l.MaxRetryWait.D(), RetryBudget: l.RetryBudget,
		Breaker:    breaker.Config{Failures: p.Breaker.Failures, Ratio: p.Breaker.Ratio, OpenFor: p.Breaker.OpenFor.D()},
		FixedLanes: !p.Adaptive(), LanesProbe: p.LanesProbe,
	}
	if r := p.RateLimit; r != nil {
		ap.RateLimit = actors.RateLimit{RPM: r.RPM, TPM: r.TPM, Burst: r.Burst}
	}
	if r := p.KeyRateLimit; r != nil {
		ap.KeyRateLimit = actors.RateLimit{RPM: r.RPM, TPM: r.TPM, Burst: r.Burst}
	}
	return ap
}

// Unready makes /readyz answer 503 while the gateway still admits and serves: a drain's first step.
func (a *App) Unready() { a.server.Unready() }

// Drain stops the model list refreshes and admitting, waits until nothing runs or ctx ends, then stops the actors.
func (a *App) Drain(ctx context.Context) error {
	a.mu.Lock()
	a.drained = true
	a.refresh.stop() // no model is added to a gateway on its way down
	a.mu.Unlock()
	a.Gateway.Drain()
	for {
		st := a.Gateway.State()
		if st.Running == 0 && st.Queued == 0 {
			break
		}
		select {
		case <-ctx.Done():
			a.log.Warn().Int("running", st.Running).Int("queued", st.Queued).Msg("drain deadline passed; stopping what still runs")
			return a.shutdown()
		case <-time.After(50 * time.Millisecond): // polling the gate while clients finish
		}
	}
	return a.shutdown()
}

func (a *App) shutdown() error {
	a.server.Stopping() // what still runs is stopped: an answer lost from now on is the drain's
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if a.keys != nil {
		a.keys.close() // no revocation is answered by a gateway on its way down
	}
	err := a.Gateway.Shutdown(ctx)
	if a.spend != nil {
		a.spend.close() // after the actors: every call's cost is owed by now
	}
	if a.shared != nil {
		a.shared.gw.Store(nil) // the engine's last notices have no actor to go to
		// After the actors: every lease is released by now, and the peers' shares grow
		// at once when this replica leaves the alive set.
		err = errors.Join(err, a.shared.e.Close())
	}
	if a.store != nil {
		// After the actors: every call has finished and been recorded; the ledger's buffer
		// is written before the database closes.
		err = errors.Join(err, a.store.Close(ctx))
	}
	return err
}

// affinityOf is the session affinity table's settings (SPEC §19).
func affinityOf(l *config.Limits) affinity.Config {
	return affinity.Config{TTL: l.AffinityTTL.D(), Max: l.AffinityMax}
}
