package config

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// secrets lists every key and CLI env value in c, to scrub from messages.
func (c *Config) secrets() []string {
	out := slices.Concat(c.Auth.apiKeys(), c.Auth.AdminKeys)
	if c.Store != nil && c.Store.Postgres != "" {
		out = append(out, c.Store.Postgres)
	}
	if c.Cluster != nil && c.Cluster.Redis.Password != "" {
		out = append(out, c.Cluster.Redis.Password)
	}
	for i := range c.Providers {
		pr := &c.Providers[i]
		out = append(out, pr.Keys...)
		for _, v := range pr.Env {
			out = append(out, v)
		}
		for j := range pr.Models {
			out = append(out, pr.Models[j].Keys...)
		}
	}
	return out
}

// Summary describes the config for the start-up log, one line per item. It never includes a
// key, an env value or a base URL's user info or query.
func (c *Config) Summary() []string {
	out := []string{
		"config: " + c.Source,
		"listen: " + c.Listen,
		"auth: " + c.Auth.String(),
		fmt.Sprintf("limits: max_running %d, max_admitted %d, queue_length %d, queue_timeout %s, retry_after %s, max_body_bytes %d",
			c.Limits.MaxRunning, c.Limits.MaxAdmitted, c.Limits.QueueLength, c.Limits.QueueTimeout,
			c.Limits.RetryAfter, c.Limits.MaxBodyBytes),
		fmt.Sprintf("drain: drain_delay %s, drain_grace %s", c.DrainDelay, c.DrainGrace),
		fmt.Sprintf("connections: header_timeout %s, body_timeout %s, idle_timeout %s, write_timeout %s, max_header_bytes %d, max_conns_per_client %s, max_event_bytes %d",
			c.Limits.HeaderTimeout, c.Limits.BodyTimeout, c.Limits.IdleTimeout, c.Limits.WriteTimeout, c.Limits.MaxHeaderBytes,
			perClient(c.Limits.MaxConnsPerClient), c.Limits.MaxEventBytes),
	}
	for i := range c.Providers {
		out = append(out, "provider "+c.Providers[i].String())
	}
	if c.usesResilience() {
		out = append(out, fmt.Sprintf("resilience: retries %d, retry_budget %g, max_retry_wait %s (docs/resilience.md)",
			c.Limits.Retries, c.Limits.RetryBudget, c.Limits.MaxRetryWait))
	}
	for i := range c.Routes {
		out = append(out, "route "+c.Routes[i].String())
	}
	if c.Cluster != nil {
		out = append(out, c.Cluster.summary()+", replica "+c.ReplicaName())
	}
	if c.Store != nil {
		out = append(out, "store: "+c.Store.String())
	}
	return out
}

// String is Summary on one line, so a Config printed with %v shows no secret.
func (c Config) String() string { return strings.Join(c.Summary(), "; ") }

// GoString keeps %#v from printing keys too.
func (c Config) GoString() string { return "config.Config{" + c.String() + "}" }

// String counts the keys instead of showing them.
func (a Auth) String() string {
	if len(a.APIKeys) == 0 {
		return fmt.Sprintf("off (no api_keys: anyone who can reach the address may call the API; a foreign Host "+
			"or a web page's foreign Origin is refused; %s, %s)",
			plural(len(a.AllowedHosts), "allowed host"), plural(len(a.AllowedOrigins), "allowed origin"))
	}
	admin := "admin routes accept the api keys"
	if len(a.AdminKeys) > 0 {
		admin = plural(len(a.AdminKeys), "admin key")
	}
	return plural(len(a.APIKeys), "api key") + ", " + admin
}

// GoString keeps %#v from printing keys.
func (a Auth) GoString() string { return "config.Auth{" + a.String() + "}" }

// String summarises a provider without its keys or env values.
func (p Provider) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (kind %s", p.Name, p.Kind)
	switch {
	case IsCLI(p.Kind):
		fmt.Fprintf(&b, ", command %s", p.Command)
		if len(p.Env) > 0 {
			fmt.Fprintf(&b, ", %s", plural(len(p.Env), "env var"))
		}
	case p.BaseURL != "":
		fmt.Fprintf(&b, ", %s", safeURL(p.BaseURL))
	case IsHTTP(p.Kind):
		b.WriteString(", default base_url")
	}
	if len(p.Keys) > 0 {
		fmt.Fprintf(&b, ", %s", plural(len(p.Keys), "key"))
	}
	fmt.Fprintf(&b, ", lanes %d, model_lanes %d, queue %d/%s, run_timeout %s",
		p.Lanes, p.ModelLanes, p.QueueLength, p.QueueTimeout, p.RunTimeout)
	if r := p.RateLimit; r != nil {
		fmt.Fprintf(&b, ", rpm %d, tpm %d, burst %d", r.RPM, r.TPM, r.burst())
	}
	if r := p.KeyRateLimit; r != nil {
		fmt.Fprintf(&b, ", key_rate_limit rpm %d tpm %d", r.RPM, r.TPM)
	}
	if p.Retries != defaultRetries {
		fmt.Fprintf(&b, ", retries %d", p.Retries)
	}
	if !p.Adaptive() {
		b.WriteString(", adaptive_lanes off")
	}
	if len(p.Models) == 0 {
		b.WriteString(", models from the backend")
	} else {
		ids := make([]string, len(p.Models))
		for i := range p.Models {
			ids[i] = p.Models[i].ID
		}
		fmt.Fprintf(&b, ", models %s", strings.Join(ids, " "))
	}
	b.WriteString(")")
	if p.Discovered != "" {
		fmt.Fprintf(&b, " found by %s", p.Discovered)
	}
	return b.String()
}

// GoString keeps %#v from printing keys.
func (p Provider) GoString() string { return "config.Provider{" + p.String() + "}" }

// String summarises a model without its keys.
func (m Model) String() string {
	s := fmt.Sprintf("%s (model_lanes %d", m.ID, m.ModelLanes)
	if len(m.Keys) > 0 {
		s += ", " + plural(len(m.Keys), "key")
	}
	return s + ")"
}

// GoString keeps %#v from printing keys.
func (m Model) GoString() string { return "config.Model{" + m.String() + "}" }

// safeURL drops user info and query, where keys sometimes hide (Gemini's ?key=).
func safeURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable base_url)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func perClient(n int) string {
	if n == 0 {
		return "off"
	}
	return fmt.Sprint(n)
}
