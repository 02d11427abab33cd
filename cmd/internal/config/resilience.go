package config

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Breaker is a provider's circuit breaker (SPEC §10). After Load every field holds its
// effective value.
type Breaker struct {
	// Failures is how many consecutive provider-down answers open it; omitted → 5; ≥ 1.
	Failures int `yaml:"failures"`
	// Ratio opens it when more than this share of at least 20 calls in 30 s failed; omitted
	// → 0.5; in (0, 1].
	Ratio float64 `yaml:"ratio"`
	// OpenFor is how long it stays open before one probe; omitted → 30s; doubles while
	// probes fail, up to 5m; between 1s and 5m.
	OpenFor Duration `yaml:"open_for"`
}

// The failures fallback_on may name (SPEC §10).
const (
	FallbackRateLimited  = "rate_limited"  // the model's attempts ended in a rate limit
	FallbackUnavailable  = "unavailable"   // provider down, or its circuit open
	FallbackQueueFull    = "queue_full"    // provider_queue_full
	FallbackQueueTimeout = "queue_timeout" // provider_queue_timeout
)

// fallbackOnAll is fallback_on's default, in SPEC order.
var fallbackOnAll = []string{FallbackRateLimited, FallbackUnavailable, FallbackQueueFull, FallbackQueueTimeout}

// Defaults of SPEC §10 and §11 owned here.
const (
	defaultRetries        = 2
	defaultRetryBudget    = 0.2
	defaultMaxRetryWait   = 2 * time.Second
	defaultKeyCooldown    = 10 * time.Second
	defaultMaxKeyCooldown = 5 * time.Minute
	defaultLanesProbe     = 20
	defaultBreakFailures  = 5
	defaultBreakRatio     = 0.5
	defaultBreakOpenFor   = 30 * time.Second
	maxBreakOpenFor       = 5 * time.Minute
)

// Adaptive reports whether the provider learns its effective lanes (adaptive_lanes, default
// true).
func (p *Provider) Adaptive() bool { return p.AdaptiveLanes == nil || *p.AdaptiveLanes }

// limitsResilienceDefaults fills the gateway-wide retry settings.
func limitsResilienceDefaults(l *Limits, omitted func(path string, zero bool) bool) {
	if omitted("limits.retries", l.Retries == 0) {
		l.Retries = defaultRetries
	}
	if omitted("limits.retry_budget", l.RetryBudget == 0) {
		l.RetryBudget = defaultRetryBudget
	}
	if omitted("limits.max_retry_wait", l.MaxRetryWait == 0) {
		l.MaxRetryWait = Duration(defaultMaxRetryWait)
	}
}

// providerResilienceDefaults fills one provider's resilience fields; omitted gets the field
// name relative to the provider.
func providerResilienceDefaults(p *Provider, l *Limits, omitted func(field string, zero bool) bool) {
	if omitted("retries", p.Retries == 0) {
		p.Retries = l.Retries
	}
	if IsHTTP(p.Kind) {
		if omitted("key_cooldown", p.KeyCooldown == 0) {
			p.KeyCooldown = Duration(defaultKeyCooldown)
		}
		if omitted("max_key_cooldown", p.MaxKeyCooldown == 0) {
			p.MaxKeyCooldown = Duration(max(defaultMaxKeyCooldown, p.KeyCooldown.D()))
		}
	}
	if omitted("lanes_probe", p.LanesProbe == 0) {
		p.LanesProbe = defaultLanesProbe
	}
	b := &p.Breaker
	if omitted("breaker.failures", b.Failures == 0) {
		b.Failures = defaultBreakFailures
	}
	if omitted("breaker.ratio", b.Ratio == 0) {
		b.Ratio = defaultBreakRatio
	}
	if omitted("breaker.open_for", b.OpenFor == 0) {
		b.OpenFor = Duration(defaultBreakOpenFor)
	}
}

// modelResilienceDefaults gives a model with fallbacks the default fallback_on.
func modelResilienceDefaults(m *Model, omitted func(field string, zero bool) bool) {
	if len(m.Fallbacks) > 0 && omitted("fallback_on", len(m.FallbackOn) == 0) {
		m.FallbackOn = slices.Clone(fallbackOnAll)
	}
}

func validateLimitsResilience(l *Limits, p *problems) {
	if l.Retries < 0 {
		p.add("limits.retries", "must be 0 (no retries) or more, got %d", l.Retries)
	}
	if !(l.RetryBudget > 0 && l.RetryBudget <= 1) {
		p.add("limits.retry_budget", "must be a share above 0 and at most 1 (0.2 = 20%% of calls), got %g", l.RetryBudget)
	}
	if l.MaxRetryWait <= 0 {
		p.add("limits.max_retry_wait", "must be positive, got %s", l.MaxRetryWait)
	}
}

// validateResilience checks one provider's resilience fields.
func validateResilience(pr *Provider, family int, path string, p *problems) {
	// A value inherited from a bad limits.retries was reported there.
	if _, explicit := p.lines[path+".retries"]; pr.Retries < 0 && (p.lines == nil || explicit) {
		p.add(path+".retries", "must be 0 (no retries) or more, got %d", pr.Retries)
	}
	if pr.LanesProbe < 1 {
		p.add(path+".lanes_probe", "must be at least 1, got %d", pr.LanesProbe)
	}
	b := &pr.Breaker
	if b.Failures < 1 {
		p.add(path+".breaker.failures", "must be at least 1, got %d", b.Failures)
	}
	if !(b.Ratio > 0 && b.Ratio <= 1) {
		p.add(path+".breaker.ratio", "must be a share above 0 and at most 1, got %g", b.Ratio)
	}
	if b.OpenFor.D() < time.Second || b.OpenFor.D() > maxBreakOpenFor {
		p.add(path+".breaker.open_for", "must be between 1s and %s, got %s", maxBreakOpenFor, b.OpenFor)
	}
	if pr.KeyRateLimit != nil {
		validateRate(pr.KeyRateLimit, path+".key_rate_limit", p)
	}
	if family != familyHTTP {
		for field, isSet := range map[string]bool{"key_rate_limit": pr.KeyRateLimit != nil,
			"key_cooldown": pr.KeyCooldown != 0, "max_key_cooldown": pr.MaxKeyCooldown != 0} {
			if isSet {
				p.add(path+"."+field, "only for HTTP kinds, which have keys; not kind %s", pr.Kind)
			}
		}
		return
	}
	positive(pr.KeyCooldown, path+".key_cooldown", p)
	switch {
	case pr.MaxKeyCooldown <= 0:
		p.add(path+".max_key_cooldown", "must be positive, got %s", pr.MaxKeyCooldown)
	case pr.KeyCooldown > 0 && pr.MaxKeyCooldown < pr.KeyCooldown:
		p.add(path+".max_key_cooldown", "must be at least key_cooldown (%s), got %s", pr.KeyCooldown, pr.MaxKeyCooldown)
	}
}

// validateFallbackOn checks a model's fallback_on list.
func validateFallbackOn(m *Model, mp string, p *problems) {
	if len(m.FallbackOn) > 0 && len(m.Fallbacks) == 0 {
		p.add(mp+".fallback_on", "set without fallbacks: there is nothing to fall back to")
		return
	}
	seen := map[string]bool{}
	for i, on := range m.FallbackOn {
		fp := fmt.Sprintf("%s.fallback_on[%d]", mp, i)
		switch {
		case !slices.Contains(fallbackOnAll, on):
			p.add(fp, "unknown failure %q (valid: %s)", on, strings.Join(fallbackOnAll, ", "))
		case seen[on]:
			p.add(fp, "%q listed twice", on)
		}
		seen[on] = true
	}
}

// usesResilience reports whether the file sets any SPEC §10–11 field beyond its default,
// for the start-up summary.
func (c *Config) usesResilience() bool {
	l := &c.Limits
	if l.Retries != defaultRetries || l.RetryBudget != defaultRetryBudget || l.MaxRetryWait.D() != defaultMaxRetryWait {
		return true
	}
	for i := range c.Providers {
		p := &c.Providers[i]
		if p.KeyRateLimit != nil || p.AdaptiveLanes != nil ||
			p.LanesProbe != defaultLanesProbe || p.Retries != l.Retries ||
			p.Breaker != (Breaker{defaultBreakFailures, defaultBreakRatio, Duration(defaultBreakOpenFor)}) ||
			IsHTTP(p.Kind) && (p.KeyCooldown.D() != defaultKeyCooldown || p.MaxKeyCooldown.D() != defaultMaxKeyCooldown) {
			return true
		}
		for j := range p.Models {
			if len(p.Models[j].Fallbacks) > 0 {
				return true
			}
		}
	}
	return false
}
