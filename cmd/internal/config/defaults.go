package config

import "fmt"

// applyDefaults fills every field the user left out. set holds the field paths present in
// the YAML; with a nil set (configs built in code) a zero value counts as left out.
// Explicit zeros are kept so validation can name them ("lanes: 0" is an error, not "default").
func applyDefaults(c *Config, set map[string]int) {
	omitted := func(path string, zero bool) bool {
		if set == nil {
			return zero
		}
		_, ok := set[path]
		return !ok
	}
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	defaultClientKeys(c.Auth.APIKeys, omitted)
	if omitted("drain_delay", c.DrainDelay == 0) {
		c.DrainDelay = Duration(defaultDrainDelay)
	}
	if omitted("drain_grace", c.DrainGrace == 0) {
		c.DrainGrace = Duration(defaultDrainGrace)
	}
	l := &c.Limits
	if omitted("limits.max_running", l.MaxRunning == 0) {
		l.MaxRunning = defaultMaxRunning
	}
	if omitted("limits.max_admitted", l.MaxAdmitted == 0) {
		l.MaxAdmitted = max(defaultMaxAdmitted, l.MaxRunning)
	}
	if omitted("limits.queue_length", l.QueueLength == 0) {
		l.QueueLength = defaultQueueLength
	}
	if omitted("limits.queue_timeout", l.QueueTimeout == 0) {
		l.QueueTimeout = Duration(defaultQueueTimeout)
	}
	if omitted("limits.retry_after", l.RetryAfter == 0) {
		l.RetryAfter = Duration(defaultRetryAfter)
	}
	if omitted("limits.max_body_bytes", l.MaxBodyBytes == 0) {
		l.MaxBodyBytes = defaultMaxBodyBytes
	}
	limitsResilienceDefaults(l, omitted)
	if c.Cluster != nil {
		clusterDefaults(c.Cluster, omitted)
	}
	serverDefaults(l, omitted)
	for i := range c.Providers {
		p := &c.Providers[i]
		path := fmt.Sprintf("providers[%d]", i)
		field := func(field string, zero bool) bool { return omitted(path+"."+field, zero) }
		providerDefaults(p, l, field)
		providerResilienceDefaults(p, l, field)
		for j := range p.Models {
			m := &p.Models[j]
			mp := fmt.Sprintf("%s.models[%d].", path, j)
			if omitted(mp+"model_lanes", m.ModelLanes == 0) {
				m.ModelLanes = p.ModelLanes
			}
			modelResilienceDefaults(m, func(field string, zero bool) bool { return omitted(mp+field, zero) })
		}
	}
}

// providerDefaults fills one provider from its kind's row of the SPEC §2 table and from the
// gateway limits. An unknown kind gets no kind defaults; validation reports it.
func providerDefaults(p *Provider, l *Limits, omitted func(field string, zero bool) bool) {
	k, known := kinds[p.Kind]
	if known && omitted("lanes", p.Lanes == 0) {
		p.Lanes = k.lanes
	}
	if known && omitted("model_lanes", p.ModelLanes == 0) {
		// Capped at lanes so "lanes: 1" on nvidia (default model_lanes 2) is not an error.
		p.ModelLanes = k.modelLanes
		if p.Lanes >= 1 {
			p.ModelLanes = min(p.ModelLanes, p.Lanes)
		}
	}
	if omitted("queue_length", p.QueueLength == 0) {
		p.QueueLength = l.QueueLength
	}
	if omitted("queue_timeout", p.QueueTimeout == 0) {
		p.QueueTimeout = l.QueueTimeout
	}
	if known && omitted("run_timeout", p.RunTimeout == 0) {
		p.RunTimeout = Duration(k.runTimeout)
	}
	switch {
	case !known:
	case k.family == familyCLI:
		if omitted("command", p.Command == "") {
			p.Command = cliCommands[p.Kind]
		}
		if omitted("kill_grace", p.KillGrace == 0) {
			p.KillGrace = Duration(defaultKillGrace)
		}
	case k.family == familyHTTP:
		if omitted("refresh_models", p.RefreshModels == 0) {
			p.RefreshModels = Duration(defaultRefreshModels)
		}
	}
}

// serverDefaults fills the limits on what one client or backend may make the gateway hold.
// MaxConnsPerClient has none: its zero means no cap.
func serverDefaults(l *Limits, omitted func(path string, zero bool) bool) {
	if omitted("limits.affinity_ttl", l.AffinityTTL == 0) {
		l.AffinityTTL = Duration(defaultAffinityTTL)
	}
	if omitted("limits.affinity_max", l.AffinityMax == 0) {
		l.AffinityMax = defaultAffinityMax
	}
	if omitted("limits.max_event_bytes", l.MaxEventBytes == 0) {
		l.MaxEventBytes = defaultMaxEventBytes
	}
	if omitted("limits.header_timeout", l.HeaderTimeout == 0) {
		l.HeaderTimeout = Duration(defaultHeaderTimeout)
	}
	if omitted("limits.body_timeout", l.BodyTimeout == 0) {
		l.BodyTimeout = Duration(defaultBodyTimeout)
	}
	if omitted("limits.idle_timeout", l.IdleTimeout == 0) {
		l.IdleTimeout = Duration(defaultIdleTimeout)
	}
	if omitted("limits.write_timeout", l.WriteTimeout == 0) {
		l.WriteTimeout = Duration(defaultWriteTimeout)
	}
	if omitted("limits.max_header_bytes", l.MaxHeaderBytes == 0) {
		l.MaxHeaderBytes = defaultMaxHeaders
	}
}
