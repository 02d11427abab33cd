package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/tollgate/tollgate/actors"
	"github.com/tollgate/tollgate/cmd/internal/config"
)

// Hot reload (SPEC §16). The new file is validated as --check-config validates it
// (config.Load); an invalid one changes nothing. A valid one is laid over the config in
// force (config.Reloaded: the settings that need a restart keep their old values and are
// reported), its adapters are built (a provider whose adapter settings stay keeps its
// adapter, so its running calls and connection pool are undisturbed), HTTP providers list
// their models, and the gateway applies the rest in its actors (actors.Gateway.Reconfigure).

// InvalidConfig is a reload refused because the new file is invalid: nothing changed.
type InvalidConfig struct {
	Err error // config.Load's, every problem joined
}

func (e *InvalidConfig) Error() string {
	return "the configuration is invalid, nothing changed: " + e.Err.Error()
}
func (e *InvalidConfig) Unwrap() error { return e.Err }

// Problems lists each problem (file, line, field, what is wrong), for the answer's list.
func (e *InvalidConfig) Problems() []string {
	var out []string
	if j, ok := e.Err.(interface{ Unwrap() []error }); ok {
		for _, err := range j.Unwrap() {
			out = append(out, err.Error())
		}
		return out
	}
	return strings.Split(e.Err.Error(), "\n")
}

// Reload reads the configuration again with read (Options.Reload) and applies it. It returns
// what changed; an error of type *InvalidConfig when the file is invalid, with nothing
// changed. It logs one line with the outcome either way.
func (a *App) Reload(ctx context.Context) (config.Changes, error) {
	ch, err := a.reload(ctx)
	var invalid *InvalidConfig
	switch {
	case errors.As(err, &invalid):
		a.log.Error().Strs("errors", invalid.Problems()).Msg("reload refused: the configuration is invalid; nothing changed")
	case err != nil:
		a.log.Error().Err(err).Strs("changes", ch.Lines()).Msg("reload failed")
	default:
		a.log.Info().Strs("changes", ch.Lines()).Strs("needs_restart", ch.Restart).Msg("configuration reloaded")
	}
	return ch, err
}

func (a *App) reload(ctx context.Context) (config.Changes, error) {
	if a.opts.Reload == nil {
		return config.Changes{}, &InvalidConfig{Err: errors.New("tollgate was started without --config: there is no file to re-read")}
	}
	// The file is read under the lock, so that of two reloads at once the later read is
	// the one applied last.
	a.mu.Lock()
	defer a.mu.Unlock()
	next, err := a.opts.Reload()
	if err != nil {
		return config.Changes{}, &InvalidConfig{Err: err}
	}
	if a.drained {
		return config.Changes{}, errors.New("reload: the gateway is shutting down")
	}
	in, ch := config.Reloaded(a.config, next)
	b, err := a.build(ctx, in)
	if err != nil {
		return ch, fmt.Errorf("reload: %w", err)
	}
	if a.Metrics != nil {
		b.gopts.Observer = a.Metrics
	}
	// Once built, the change is applied whole: a client that hangs up on POST /admin/reload
	// must not leave it half sent.
	gch, err := a.Gateway.Reconfigure(context.WithoutCancel(ctx), b.gopts)
	if err != nil && !errors.Is(err, actors.ErrUnconfirmed) {
		return ch, fmt.Errorf("reload: %w", err) // refused before anything was sent
	}
	if ch.Rebuilt = gch.Rebuilt; len(ch.Rebuilt) > 0 {
		ch.Unchanged = false // the file is the same, but providers out of service were rebuilt
	}
	// In force, confirmed or not: the app adopts it, or the next reload would diff against
	// settings the gateway no longer runs.
	if a.Metrics != nil {
		a.Metrics.Declare(series(in))
	}
	a.refresh.stop()
	a.config, a.backends = in, b.backends
	a.setPrices(in)
	a.refresh = startRefresh(a.Gateway, b.listers, b.known, a.opts)
	if err != nil {
		return ch, fmt.Errorf("reload: %w", err)
	}
	return ch, nil
}

// reloadRequest is POST /admin/reload's: the changes as the answer's document.
func (a *App) reloadRequest(ctx context.Context) (any, error) {
	ch, err := a.Reload(ctx)
	if err != nil {
		return nil, err
	}
	return struct {
		Reloaded bool     `json:"reloaded"`
		Summary  []string `json:"summary"`
		config.Changes
	}{true, ch.Lines(), ch}, nil
}

// stillListed is what the gateway serves of provider p beyond models (those a listing
// added), as models with p's settings in force.
func (a *App) stillListed(p *config.Provider, models []actors.Model) []actors.Model {
	have := map[string]bool{}
	for _, m := range models {
		have[m.Name] = true
	}
	var out []actors.Model
	for _, c := range a.Gateway.Models() {
		name, ok := strings.CutPrefix(c.ID, p.Name+"/")
		if !ok || c.Spec.Route || c.Spec.Provider != p.Name || have[name] {
			continue
		}
		out = append(out, actors.Model{Name: name, Lanes: p.ModelLanes, Card: c.Spec})
	}
	return out
}

// backendSig is what a provider's adapter is built from: while it stays, a reload keeps the
// adapter. Its admission settings (lanes, queues, limits, resilience), routing and prices are
// the gateway's and change without a new adapter; TestSignatureClassifiesEveryField holds
// every field of config.Provider and config.Model to one side or the other.
type backendSig struct {
	p             config.Provider
	maxEventBytes int
}

func signature(p *config.Provider, l *config.Limits) backendSig {
	s := backendSig{p: *p, maxEventBytes: l.MaxEventBytes}
	q := &s.p
	q.Lanes, q.ModelLanes, q.QueueLength, q.QueueTimeout, q.RunTimeout = 0, 0, 0, 0, 0
	q.RateLimit, q.KeyRateLimit, q.KeyCooldown, q.MaxKeyCooldown, q.Retries = nil, nil, 0, 0, 0
	q.AdaptiveLanes, q.LanesProbe, q.Breaker, q.RefreshModels, q.Aliases, q.Discovered = nil, 0, config.Breaker{}, 0, nil, ""
	q.Models = make([]config.Model, len(p.Models))
	for i, m := range p.Models {
		m.ModelLanes, m.Fallbacks, m.FallbackOn, m.Aliases, m.Price = 0, nil, nil, nil, nil
		q.Models[i] = m
	}
	return s
}

func (s backendSig) equal(t backendSig) bool { return reflect.DeepEqual(s, t) }

// fingerprints name keys without holding them: a reload tells a key that stays (and keeps
// its cooldown) from one replaced by their SHA-256, of which a prefix is enough.
func fingerprints(keys []string) []string {
	if len(keys) == 0 {
		return nil
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		sum := sha256.Sum256([]byte(k))
		out[i] = hex.EncodeToString(sum[:8])
	}
	return out
}
