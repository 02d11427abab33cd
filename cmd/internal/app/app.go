// Package app wires a validated configuration into a running gateway: adapters, the actor
// system and the HTTP handler. cmd/tollgate, the load harness and the end-to-end tests all
// build the gateway this one way.
package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/actors"
	"github.com/tollgate/tollgate/cmd/internal/config"
	"github.com/tollgate/tollgate/httpapi"
	"github.com/tollgate/tollgate/providers/llm"
)

// App is a wired gateway.
type App struct {
	Gateway *actors.Gateway
	Handler http.Handler
	Config  *config.Config
	log     zerolog.Logger
}

// Options tune New beyond the configuration. Zero values are fine.
type Options struct {
	Logger zerolog.Logger
	// Backends, when it has an entry for a provider name, replaces the adapter the
	// configuration would build (tests inject instrumented backends this way).
	Backends map[string]llm.Backend
	// DiscoveryTimeout bounds the start-up model listing of HTTP providers without
	// configured models; 0 → 5s.
	DiscoveryTimeout time.Duration
}

// New builds the adapters, lists the models of providers that did not configure theirs,
// and starts the actor system.
func New(ctx context.Context, cfg *config.Config, o Options) (*App, error) {
	if o.DiscoveryTimeout <= 0 {
		o.DiscoveryTimeout = 5 * time.Second
	}
	gopts := actors.Options{
		MaxRunning: cfg.Limits.MaxRunning, MaxAdmitted: cfg.Limits.MaxAdmitted,
		RetryAfter: cfg.Limits.RetryAfter.D(), Logger: o.Logger,
	}
	var errs []error
	for i := range cfg.Providers {
		p := &cfg.Providers[i]
		b, ok := o.Backends[p.Name]
		if !ok {
			var err error
			if b, err = backendFor(p, o.Logger); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		models := p.Models
		if len(models) == 0 {
			models = discoverModels(ctx, b, p, o)
		}
		gopts.Providers = append(gopts.Providers, toProvider(p, models, b))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	g, err := actors.New(gopts)
	if err != nil {
		return nil, fmt.Errorf("start gateway: %w", err)
	}
	h := httpapi.New(httpapi.Options{
		Gateway: g, State: func() any { return g.State() }, MaxBodyBytes: cfg.Limits.MaxBodyBytes,
		APIKeys: cfg.Auth.APIKeys, AdminKeys: cfg.Auth.AdminKeys, Logger: o.Logger,
	})
	return &App{Gateway: g, Handler: h, Config: cfg, log: o.Logger}, nil
}

// discoverModels asks a backend that can list its models; failures leave the provider
// without models (its requests answer model_not_found) and are logged.
func discoverModels(ctx context.Context, b llm.Backend, p *config.Provider, o Options) []config.Model {
	lister, ok := b.(llm.ModelLister)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, o.DiscoveryTimeout)
	defer cancel()
	infos, err := lister.ListModels(ctx)
	if err != nil {
		o.Logger.Warn().Str("provider", p.Name).Err(err).Msg("could not list the backend's models; it serves none until restarted")
		return nil
	}
	models := make([]config.Model, 0, len(infos))
	for _, in := range infos {
		m := config.Model{ID: in.ID, ModelLanes: p.ModelLanes}
		if in.ContextWindow > 0 {
			cw := in.ContextWindow
			m.ContextWindow = &cw
		}
		if in.MaxOutputTokens > 0 {
			mo := in.MaxOutputTokens
			m.MaxOutputTokens = &mo
		}
		models = append(models, m)
	}
	o.Logger.Info().Str("provider", p.Name).Int("models", len(models)).Msg("listed the backend's models")
	return models
}

func toProvider(p *config.Provider, models []config.Model, b llm.Backend) actors.Provider {
	ap := actors.Provider{
		Name: p.Name, Kind: p.Kind, Backend: b, Lanes: p.Lanes, QueueLength: p.QueueLength,
		QueueTimeout: p.QueueTimeout.D(), RunTimeout: p.RunTimeout.D(),
	}
	if p.RateLimit != nil {
		ap.RPM = p.RateLimit.RPM
	}
	for _, m := range models {
		lanes := m.ModelLanes
		if lanes <= 0 {
			lanes = p.ModelLanes
		}
		ap.Models = append(ap.Models, actors.Model{
			Name: m.ID, Aliases: m.Aliases, Lanes: lanes,
			Card: llm.Spec{ContextWindow: m.ContextWindow, MaxOutputTokens: m.MaxOutputTokens,
				Reasoning: m.Reasoning, Tools: m.Tools, Vision: m.Vision, Fallbacks: m.Fallbacks},
		})
	}
	return ap
}

// Drain stops admitting, waits until nothing runs or ctx ends, then stops the actors.
func (a *App) Drain(ctx context.Context) error {
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
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return a.Gateway.Shutdown(ctx)
}
