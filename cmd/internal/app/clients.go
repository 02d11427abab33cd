package app

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/tollgate/tollgate/cmd/internal/config"
	"github.com/tollgate/tollgate/cmd/internal/store"
	"github.com/tollgate/tollgate/httpapi"
	"github.com/tollgate/tollgate/providers/catalog"
	"github.com/tollgate/tollgate/providers/llm"
)

// clientKeys turns the config's auth.api_keys into the HTTP layer's client keys.
func clientKeys(keys []config.ClientKey) []httpapi.ClientKey {
	out := make([]httpapi.ClientKey, len(keys))
	for i := range keys {
		out[i] = clientKey(&keys[i])
	}
	return out
}

// clientKey is one config key as the HTTP layer holds it.
func clientKey(k *config.ClientKey) httpapi.ClientKey {
	c := llm.Client{Name: k.Name, Weight: k.Weight, MaxRunning: k.MaxRunning, MaxQueued: k.MaxQueued}
	if k.RateLimit != nil {
		c.RPM, c.TPM = k.RateLimit.RPM, k.RateLimit.TPM
	}
	ck := httpapi.ClientKey{Secret: k.Key, Client: c, Models: k.Models}
	ck.MaxPriority, ck.LimitPriority = k.Priority()
	return ck
}

// keyLimits is a config key's limits as the store and the admin API show them.
func keyLimits(k *config.ClientKey) httpapi.KeyLimits {
	l := httpapi.KeyLimits{Weight: k.Weight, MaxRunning: k.MaxRunning, MaxQueued: k.MaxQueued, Models: k.Models,
		MaxPriority: k.MaxPriority}
	if k.RateLimit != nil {
		l.RateLimit = httpapi.KeyRate{RPM: k.RateLimit.RPM, TPM: k.RateLimit.TPM}
	}
	if k.Budget != nil {
		l.Budget = &httpapi.KeyBudget{USD: k.Budget.USD, Period: k.Budget.Period}
	}
	return l
}

// wantsStore reports whether the gateway keeps a store: one is configured, client keys are,
// or it runs the embedded default (whose admin API can make keys).
func wantsStore(cfg *config.Config) bool {
	return cfg.Store != nil || len(cfg.Auth.APIKeys) > 0 || cfg.Source == config.DefaultSource
}

// storeOptional says the gateway may run without its store when the store cannot be opened:
// only the embedded default, which names no store and no client keys, so that a machine or a
// container without a writable state directory still starts (without run-time keys or a
// ledger). A store the configuration asks for, by name or through its client keys, must open.
func storeOptional(cfg *config.Config) bool {
	return cfg.Source == config.DefaultSource && cfg.Store == nil && len(cfg.Auth.APIKeys) == 0
}

// openStore opens the configured store, or the default SQLite file: in Options.StateDir when
// set, else under the user's state directory.
func (a *App) openStore(ctx context.Context, cfg *config.Config) (*store.Store, error) {
	o := store.Options{Logger: a.log, Prices: a.price}
	switch {
	case cfg.Store != nil:
		o.SQLite, o.Postgres = cfg.Store.SQLite, cfg.Store.Postgres
	case a.opts.StateDir != "":
		o.SQLite = filepath.Join(a.opts.StateDir, "tollgate.db")
	default:
		path, err := store.DefaultPath()
		if err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		o.SQLite = path
	}
	for i := range cfg.Auth.APIKeys {
		k := &cfg.Auth.APIKeys[i]
		o.Config = append(o.Config, store.ConfigKey{Name: k.Name, KeyLimits: keyLimits(k)})
	}
	if a.Metrics != nil {
		o.OnDrop = a.Metrics.LedgerDropped
	}
	return store.Open(ctx, o)
}

// prices is what each model id costs, built once per configuration (New, each reload) so
// that recording a finished call is one map read, never a walk of the configuration under
// the app's lock.
type prices map[string]store.Price

// priceTable prices every configured model: its own price: when set, else the catalog's list
// price for a cloud model; CLIs, local servers and the fake cost nothing unless configured.
func priceTable(cfg *config.Config) prices {
	t := prices{}
	for i := range cfg.Providers {
		p := &cfg.Providers[i]
		listed := listPriced(p.Kind)
		for j := range p.Models {
			m := &p.Models[j]
			switch {
			case m.Price != nil:
				pr := store.Price{Input: m.Price.Input, CachedInput: m.Price.Input, Output: m.Price.Output}
				if m.Price.CachedInput != nil {
					pr.CachedInput = *m.Price.CachedInput
				}
				t[p.Name+"/"+m.ID] = pr
			case listed:
				lp, _ := catalog.ListPrice(m.ID)
				t[p.Name+"/"+m.ID] = store.Price{Input: lp.Input, CachedInput: lp.CachedInput, Output: lp.Output}
			}
		}
	}
	return t
}

// price is a model id's price ("provider/model"), from the table of the configuration in
// force. A cloud model discovered at run time, not in the configuration, costs its catalog
// list price.
func (a *App) price(model string) store.Price {
	t, kinds := a.prices.Load(), a.kinds.Load()
	if t == nil || kinds == nil {
		return store.Price{} // not started
	}
	if pr, ok := (*t)[model]; ok {
		return pr
	}
	provider, id, _ := strings.Cut(model, "/")
	if kind, ok := (*kinds)[provider]; ok && listPriced(kind) {
		lp, _ := catalog.ListPrice(id)
		return store.Price{Input: lp.Input, CachedInput: lp.CachedInput, Output: lp.Output}
	}
	return store.Price{}
}

// listPriced says a provider kind's models cost the catalog's list price unless configured:
// the cloud APIs, not the CLIs, the local servers or the fake.
func listPriced(kind string) bool {
	return config.IsHTTP(kind) && kind != "lmstudio" && kind != "ollama"
}

// setPrices makes cfg's prices the ones calls are recorded at.
func (a *App) setPrices(cfg *config.Config) {
	t := priceTable(cfg)
	kinds := make(map[string]string, len(cfg.Providers))
	for i := range cfg.Providers {
		kinds[cfg.Providers[i].Name] = cfg.Providers[i].Kind
	}
	a.prices.Store(&t)
	a.kinds.Store(&kinds)
}

// tenants is the store as the HTTP layer's Tenants, or nil (an untyped nil: no admin key
// routes) without one.
func (a *App) tenants() httpapi.Tenants {
	switch {
	case a.store == nil:
		return nil
	case a.spend != nil:
		return a.spend
	}
	return a.store
}
