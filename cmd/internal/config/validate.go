package config

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/httpapi/guard"
	"github.com/tollgate/tollgate/providers/cli"
)

// Validate checks a defaulted config (for example one changed in code after Load) and returns
// every problem joined. Load, Parse and Default already call it.
func (c *Config) Validate() error {
	p := &problems{file: c.Source}
	if p.file == "" {
		p.file = "config"
	}
	validate(c, p)
	return p.err(c.secrets())
}

// validate records every problem in c; it never stops at the first.
func validate(c *Config, p *problems) {
	validateListen(c.Listen, p)
	validateClientKeys(c.Auth.APIKeys, p)
	validateKeys(c.Auth.AdminKeys, "auth.admin_keys", p)
	validateAllowed(&c.Auth, p)
	validateLimits(&c.Limits, p)
	if c.DrainDelay < 0 {
		p.add("drain_delay", "must be 0 (no delay) or more, got %s", c.DrainDelay)
	}
	positive(c.DrainGrace, "drain_grace", p)
	if len(c.Providers) == 0 {
		p.add("providers", "at least one provider is required (tollgate without --config starts a demo provider)")
	}
	names := map[string]int{}
	for i := range c.Providers {
		pr := &c.Providers[i]
		path := fmt.Sprintf("providers[%d]", i)
		validateName(pr.Name, path, names, i, p)
		validateProvider(pr, path, p)
		validateModels(pr, path, p)
	}
	validateRefs(c, p)
	validateRoutes(c, p)
	if c.Cluster != nil {
		validateCluster(c.Cluster, p)
	}
	if c.Store != nil {
		validateStore(c.Store, p)
	}
}

func validateListen(addr string, p *problems) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		p.add("listen", "must be host:port, e.g. 127.0.0.1:8080, got %q", addr)
		return
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		p.add("listen", "port must be a number from 0 to 65535, got %q", port)
	}
	if strings.ContainsAny(host, " \t/") {
		p.add("listen", "bad host %q", host)
	}
}

// validateKeys checks a key list without ever quoting a key.
func validateKeys(keys []string, path string, p *problems) {
	for i, k := range keys {
		validateKey(k, fmt.Sprintf("%s[%d]", path, i), p)
	}
}

// validateKey checks one key without ever quoting it.
func validateKey(k, path string, p *problems) {
	switch {
	case k == "":
		p.add(path, "empty key (an unset or empty variable?); remove the entry if you meant no key")
	case strings.TrimSpace(k) != k:
		p.add(path, "key has leading or trailing white space")
	}
}

// validateAllowed checks auth.allowed_hosts and auth.allowed_origins entry by entry, with the
// parsers the Host and Origin check itself uses.
func validateAllowed(a *Auth, p *problems) {
	for i, h := range a.AllowedHosts {
		if _, err := guard.ParseHost(h); err != nil {
			p.add(fmt.Sprintf("auth.allowed_hosts[%d]", i), "%v", err)
		}
	}
	for i, o := range a.AllowedOrigins {
		if _, err := guard.ParseOrigin(o); err != nil {
			p.add(fmt.Sprintf("auth.allowed_origins[%d]", i), "%v", err)
		}
	}
}

func validateLimits(l *Limits, p *problems) {
	if l.MaxRunning < 1 {
		p.add("limits.max_running", "must be at least 1, got %d", l.MaxRunning)
	}
	if l.MaxAdmitted < l.MaxRunning {
		p.add("limits.max_admitted", "must be at least max_running (%d), got %d", l.MaxRunning, l.MaxAdmitted)
	}
	if l.QueueLength < 0 {
		p.add("limits.queue_length", "must be 0 (no queue) or more, got %d", l.QueueLength)
	}
	if l.QueueTimeout <= 0 {
		p.add("limits.queue_timeout", "must be positive, got %s", l.QueueTimeout)
	}
	if l.RetryAfter.D() < minRetryAfter || l.RetryAfter.D() > maxRetryAfter {
		p.add("limits.retry_after", "must be between %s and %s (Retry-After is whole seconds), got %s", minRetryAfter, maxRetryAfter, l.RetryAfter)
	}
	if l.MaxBodyBytes < 1 {
		p.add("limits.max_body_bytes", "must be at least 1, got %d", l.MaxBodyBytes)
	}
	validateLimitsResilience(l, p)
	if l.MaxEventBytes < 1 {
		p.add("limits.max_event_bytes", "must be at least 1, got %d", l.MaxEventBytes)
	}
	positive(l.AffinityTTL, "limits.affinity_ttl", p)
	if l.AffinityMax < 1 {
		p.add("limits.affinity_max", "must be at least 1, got %d", l.AffinityMax)
	}
	positive(l.HeaderTimeout, "limits.header_timeout", p)
	positive(l.BodyTimeout, "limits.body_timeout", p)
	positive(l.WriteTimeout, "limits.write_timeout", p)
	positive(l.IdleTimeout, "limits.idle_timeout", p)
	if l.MaxHeaderBytes < minMaxHeaders {
		p.add("limits.max_header_bytes", "must be at least %d (a request line and the headers every client sends), got %d", minMaxHeaders, l.MaxHeaderBytes)
	}
	if l.MaxConnsPerClient < 0 {
		p.add("limits.max_conns_per_client", "must be 0 (no cap) or more, got %d", l.MaxConnsPerClient)
	}
}

// validateName checks a provider name and records it in names (name → index) for duplicates.
func validateName(name, path string, names map[string]int, i int, p *problems) {
	switch {
	case name == "":
		p.add(path+".name", "required")
		return
	case strings.Contains(name, "/"):
		p.add(path+".name", "%q must not contain \"/\" (model ids are \"provider/model\", split at the first \"/\")", name)
	case !validName(name):
		p.add(path+".name", "%q may contain only letters, digits, '.', '_' and '-'", name)
	}
	if j, dup := names[name]; dup {
		p.add(path+".name", "duplicate provider name %q (also providers[%d])", name, j)
		return
	}
	names[name] = i
}

func validName(s string) bool {
	for _, c := range s {
		ok := c == '.' || c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !ok {
			return false
		}
	}
	return s != ""
}

func validateProvider(pr *Provider, path string, p *problems) {
	k, known := kinds[pr.Kind]
	switch {
	case pr.Kind == "":
		p.add(path+".kind", "required (one of: %s)", strings.Join(Kinds(), ", "))
	case !known:
		p.add(path+".kind", "unknown kind %q (valid: %s)", pr.Kind, strings.Join(Kinds(), ", "))
	}
	// With an unknown kind no default was applied, so a zero is not the user's.
	if pr.Lanes < 1 && (known || pr.Lanes < 0) {
		p.add(path+".lanes", "must be at least 1 (omit it for the kind's default of %d), got %d", k.lanes, pr.Lanes)
	}
	switch {
	case pr.ModelLanes < 1 && !known && pr.ModelLanes == 0:
	case pr.ModelLanes < 1:
		p.add(path+".model_lanes", "must be at least 1 (omit it for the kind's default of %d), got %d", k.modelLanes, pr.ModelLanes)
	case pr.Lanes >= 1 && pr.ModelLanes > pr.Lanes:
		p.add(path+".model_lanes", "model_lanes (%d) must not exceed lanes (%d)", pr.ModelLanes, pr.Lanes)
	}
	if pr.QueueLength < 0 {
		p.add(path+".queue_length", "must be 0 (no queue) or more, got %d", pr.QueueLength)
	}
	positive(pr.QueueTimeout, path+".queue_timeout", p)
	if known {
		positive(pr.RunTimeout, path+".run_timeout", p)
	}
	if pr.RateLimit != nil {
		validateRate(pr.RateLimit, path+".rate_limit", p)
	}
	validateKeys(pr.Keys, path+".keys", p)
	if known {
		validateKindFields(pr, k.family, path, p)
		validateResilience(pr, k.family, path, p)
	}
}

func positive(d Duration, path string, p *problems) {
	if d <= 0 {
		p.add(path, "must be positive, got %s", d)
	}
}

func validateRate(r *RateLimit, path string, p *problems) {
	if r.RPM < 0 {
		p.add(path+".rpm", "must be 0 (unlimited) or more, got %d", r.RPM)
	}
	if r.TPM < 0 {
		p.add(path+".tpm", "must be 0 (unlimited) or more, got %d", r.TPM)
	}
	if r.RPM == 0 && r.TPM == 0 {
		p.add(path, "set rpm or tpm (or remove %s)", path[strings.LastIndex(path, ".")+1:])
	}
	switch {
	case r.Burst < 0:
		p.add(path+".burst", "must be 0 (ten seconds' worth) or more, got %d", r.Burst)
	case r.Burst > 0 && r.RPM <= 0:
		p.add(path+".burst", "is the rpm bucket's size: set rpm too (the tpm bucket holds ten seconds of tokens)")
	}
}

// validateKindFields rejects fields the provider's kind does not use, so a misplaced setting
// is not silently ignored.
func validateKindFields(pr *Provider, family int, path string, p *problems) {
	notFor := func(field, which string) {
		p.add(path+"."+field, "only for %s, not kind %s", which, pr.Kind)
	}
	const cliKinds = "CLI kinds (codex-cli, claude-cli, gemini-cli)"
	if family != familyCLI {
		for field, isSet := range map[string]bool{"command": pr.Command != "", "args": len(pr.Args) > 0,
			"env": len(pr.Env) > 0, "workdir": pr.Workdir != "", "kill_grace": pr.KillGrace != 0} {
			if isSet {
				notFor(field, cliKinds)
			}
		}
	}
	if family != familyHTTP && pr.BaseURL != "" {
		notFor("base_url", "HTTP kinds (use env to point a CLI at another backend)")
	}
	if family != familyHTTP && pr.RefreshModels != 0 {
		notFor("refresh_models", "HTTP kinds")
	}
	if family == familyCLI && len(pr.Keys) > 0 {
		p.add(path+".keys", "not used by kind %s (the CLI uses its own login; pass credentials with env)", pr.Kind)
	}
	if family != familyHTTP && len(pr.Models) == 0 {
		p.add(path+".models", "list the models this %s provider serves (it cannot report them)", pr.Kind)
	}
	validateOwnFields(pr, family, path, p)
}

// validateOwnFields checks the fields only the provider's family uses.
func validateOwnFields(pr *Provider, family int, path string, p *problems) {
	switch family {
	case familyHTTP:
		validateBaseURL(pr.BaseURL, path+".base_url", p)
		if pr.RefreshModels < 0 {
			p.add(path+".refresh_models", "must be 0 (read once at start) or more, got %s", pr.RefreshModels)
		}
	case familyCLI:
		if pr.Command == "" {
			p.add(path+".command", "must not be empty (omit it for %q)", cliCommands[pr.Kind])
		}
		if pr.KillGrace < 0 {
			p.add(path+".kill_grace", "must be 0 or more, got %s", pr.KillGrace)
		}
		for name := range pr.Env {
			if !validVarName(name) {
				p.add(path+".env."+name, "not a valid environment variable name")
			}
		}
		validateArgs(pr, path, p)
	}
}

// validateArgs rejects args that repeat a flag Tollgate already passes to the CLI: the CLI
// would refuse to run (codex: "cannot be used multiple times") or lose a setting Tollgate
// relies on (its sandbox, its output format). Nothing after "--" is a flag.
func validateArgs(pr *Provider, path string, p *problems) {
	built := cli.BuiltFlags(pr.Kind)
	for i, a := range pr.Args {
		if a == "--" {
			return
		}
		name, _, _ := strings.Cut(a, "=")
		if slices.Contains(built, name) {
			p.add(fmt.Sprintf("%s.args[%d]", path, i), "%s is already passed by Tollgate to every %s run; remove it",
				name, pr.Kind)
		}
	}
}

// validateBaseURL never quotes the URL: it may carry a key in its query or user info.
func validateBaseURL(raw, path string, p *problems) {
	if raw == "" {
		return
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		p.add(path, "not a valid URL")
	case u.Scheme != "http" && u.Scheme != "https":
		p.add(path, "must be an http:// or https:// URL")
	case u.Host == "":
		p.add(path, "has no host")
	}
}
