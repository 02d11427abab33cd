// Package config turns a YAML file (or the embedded default plus auto-discovery) into a
// validated, fully defaulted Config for the gateway.
//
// Ownership of defaults: after Load, Parse or Default return, every numeric field below holds
// its effective value; nobody downstream needs to know the SPEC §2 table. The exceptions are
// documented on the field (BaseURL "" and Workdir "" are owned by the adapters).
//
// Secrets: API keys are stored in Auth and Provider/Model Keys. They never appear in an error
// returned by this package, in Summary, or in the String/GoString forms of the types, so a
// config printed with %v or %+v by mistake does not leak them.
package config

import (
	"slices"
	"time"
)

// Config is the whole gateway configuration.
type Config struct {
	// Listen is the address to serve on; "" in YAML becomes 127.0.0.1:8080.
	Listen    string     `yaml:"listen"`
	Auth      Auth       `yaml:"auth"`
	Limits    Limits     `yaml:"limits"`
	Providers []Provider `yaml:"providers"`
	// Metrics configures GET /metrics.
	Metrics Metrics `yaml:"metrics"`
	// DrainDelay is how long, after SIGTERM, /readyz answers 503 "draining" while the
	// gateway still accepts and serves everything, so a load balancer stops sending before
	// connections are refused; omitted → 5s, an explicit 0s → no delay. SIGINT skips it.
	DrainDelay Duration `yaml:"drain_delay"`
	// DrainGrace is how long running requests get to finish once the listener has closed;
	// at its end what still runs is stopped and every open stream gets the final
	// gateway_draining error. Omitted → 30s; must be positive.
	DrainGrace Duration `yaml:"drain_grace"`
	// Routes are client-facing model ids that pick a real model per request (SPEC §12).
	Routes []Route `yaml:"routes"`
	// Cluster shares this gateway's limits with other replicas through Redis (SPEC §17);
	// nil: alone.
	Cluster *Cluster `yaml:"cluster"`
	// Store keeps run-time client keys and the spend ledger (SPEC §18); nil: the default
	// SQLite file under the user's state directory (app resolves it).
	Store *Store `yaml:"store"`
	// Source names where the config came from: the file name, or "embedded default".
	Source string `yaml:"-"`
}

// Auth lists the keys clients must present. An empty APIKeys list means the API is open
// (anyone who can reach Listen may use it); an empty AdminKeys list means the admin routes
// accept the API keys. Empty entries are a config error, never silently "auth off".
type Auth struct {
	APIKeys   []ClientKey `yaml:"api_keys"`
	AdminKeys []string    `yaml:"admin_keys"`
	// AllowedHosts and AllowedOrigins matter only with no APIKeys: then every route refuses
	// (403 forbidden_origin) a request whose Host is not localhost (or a loopback address),
	// Listen's host (any address of the machine when Listen's host is 0.0.0.0, [::] or
	// empty) or an AllowedHosts entry, and one whose Origin is not the gateway's own (the
	// console's) or an AllowedOrigins entry; a request without an Origin (curl, the SDKs) is
	// not a web page's. Empty (the zero value): nothing beyond those. Entries: a host name,
	// "*.domain", an IP address or "*" (no Host check) for hosts, scheme://host[:port] for
	// origins; httpapi/guard checks them and docs/operations.md explains.
	AllowedHosts   []string `yaml:"allowed_hosts"`
	AllowedOrigins []string `yaml:"allowed_origins"`
}

// Limits are the gateway-wide admission limits (SPEC §2), the bounds on what one client or
// one backend may make the gateway hold (SPEC §4), and the HTTP server's own timeouts.
type Limits struct {
	// MaxRunning caps requests running at once across all providers; default 10.
	MaxRunning int `yaml:"max_running"`
	// MaxAdmitted caps running + queued requests; default 16; must be ≥ MaxRunning.
	MaxAdmitted int `yaml:"max_admitted"`
	// QueueLength is the default per-provider queue length; default 8. An explicit 0 means
	// "no queue": a request that cannot start at once is rejected.
	QueueLength int `yaml:"queue_length"`
	// QueueTimeout is the default per-provider queue wait; default 60s.
	QueueTimeout Duration `yaml:"queue_timeout"`
	// RetryAfter is what "busy" answers advise; default 1s, between 1s and 60s.
	RetryAfter Duration `yaml:"retry_after"`
	// MaxBodyBytes caps a request body; default 8 MiB.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`

	// Retries is the default extra attempts per call (SPEC §10); default 2; an explicit 0
	// means no retries. A provider's retries overrides it.
	Retries int `yaml:"retries"`
	// RetryBudget is the share of a provider's calls over the last 10 s that may be retries,
	// on top of 3 per second; default 0.2; in (0, 1].
	RetryBudget float64 `yaml:"retry_budget"`
	// MaxRetryWait is the longest a retry may wait (holding its lane) before it is made;
	// default 2s; a retry that would wait longer is not made.
	MaxRetryWait Duration `yaml:"max_retry_wait"`

	// AffinityTTL is how long a conversation stays bound to the provider key and model that
	// last served it after its last success (session affinity, SPEC §19); default 1h.
	// AffinityMax caps the bindings kept, the least recently used going first; default
	// 100000. Both are read at start.
	AffinityTTL Duration `yaml:"affinity_ttl"`
	AffinityMax int      `yaml:"affinity_max"`

	// MaxEventBytes caps one SSE event read from a backend's stream (its lines from one
	// blank line to the next); default 8 MiB. A larger event ends the answer with
	// upstream_error, so a backend that never ends an event cannot grow memory.
	MaxEventBytes int `yaml:"max_event_bytes"`
	// HeaderTimeout bounds reading a request's line and headers; default 10s. Past it the
	// connection is closed.
	HeaderTimeout Duration `yaml:"header_timeout"`
	// BodyTimeout bounds reading a request's body, from the end of its headers; default 30s.
	// Past it the request is answered 408 request_timeout and the connection closed.
	BodyTimeout Duration `yaml:"body_timeout"`
	// IdleTimeout is how long a keep-alive connection may wait for its next request before it
	// is closed; default 120s, longer than the 90s Go's and most clients' pools keep an idle
	// connection, so a client seldom sends a request on a connection being closed.
	IdleTimeout Duration `yaml:"idle_timeout"`
	// WriteTimeout bounds each write of an answer to a client: a write that makes no progress
	// for this long ends the connection; default 30s. It is per write, not per answer (an
	// answer may stream for minutes), and a call's lanes never wait for it: they come back
	// when the backend has stopped.
	WriteTimeout Duration `yaml:"write_timeout"`
	// MaxHeaderBytes caps a request's line and headers together; default 64 KiB, at least
	// 1024. A request over it is answered 431 request_header_too_large and the connection
	// closed.
	MaxHeaderBytes int `yaml:"max_header_bytes"`
	// MaxConnsPerClient caps the connections open at once from one client IP address;
	// default 0, which means no cap (clients behind one proxy or NAT share an address). A
	// connection over the cap is closed as soon as it is accepted.
	MaxConnsPerClient int `yaml:"max_conns_per_client"`
}

// Metrics configures GET /metrics (SPEC §15).
type Metrics struct {
	// Public, when true, serves /metrics to anyone who can reach Listen. False (the zero
	// value) asks for an admin key when auth is configured (auth.admin_keys, else
	// auth.api_keys); with no keys configured /metrics is open either way, like the API.
	Public bool `yaml:"public"`
}

// RateLimit is a provider's own request budget (rate_limit), or each key's (key_rate_limit).
// Zero in one dimension means "not limited in that dimension"; at least one must be positive.
type RateLimit struct {
	RPM int `yaml:"rpm"` // requests per minute
	TPM int `yaml:"tpm"` // tokens per minute
	// Burst is how many requests may start back to back before the rpm rate applies; omitted
	// or 0 means ten seconds' worth, max(1, rpm/6) (rpm 6: one, then one every 10 s). Only
	// with rpm. The tpm bucket always holds ten seconds of tokens.
	Burst int `yaml:"burst"`
}

// burst is the request bucket's capacity the limiter uses: Burst, else max(1, RPM/6); 0
// without rpm.
func (r *RateLimit) burst() int {
	switch {
	case r.RPM <= 0:
		return 0
	case r.Burst > 0:
		return r.Burst
	}
	return max(1, r.RPM/6)
}

// Provider is one configured backend.
type Provider struct {
	// Name is the first part of model ids ("NAME/model"): letters, digits, '.', '_', '-'.
	Name string `yaml:"name"`
	// Kind is one of Kinds().
	Kind string `yaml:"kind"`
	// BaseURL is the backend's address; "" means the adapter's own default for the kind.
	BaseURL string `yaml:"base_url"`
	// Keys are the backend API keys, used in turn (round-robin), a rate-limited key resting
	// and a refused one set aside (SPEC §10). Not used by CLI kinds.
	Keys []string `yaml:"keys"`

	// Lanes is how many requests may run at once; omitted → the kind's default (SPEC §2).
	Lanes int `yaml:"lanes"`
	// ModelLanes is the default per-model lane count; omitted → the kind's default, capped
	// at Lanes. Must not exceed Lanes.
	ModelLanes int `yaml:"model_lanes"`
	// QueueLength omitted → Limits.QueueLength; explicit 0 → no queue for this provider.
	QueueLength int `yaml:"queue_length"`
	// QueueTimeout omitted → Limits.QueueTimeout.
	QueueTimeout Duration `yaml:"queue_timeout"`
	// RunTimeout caps one running request; omitted → the kind's default.
	RunTimeout Duration `yaml:"run_timeout"`
	// RateLimit, when set, limits what Tollgate sends to the backend.
	RateLimit *RateLimit `yaml:"rate_limit"`
	// Models lists the served models. Required for CLI and fake kinds; HTTP kinds with no
	// models get theirs from the backend's model list at start.
	Models []Model `yaml:"models"`
	// Aliases are client-name patterns ending in '*': a name one of them is a prefix of leads
	// to this provider's model of that name ("claude-*": claude-sonnet-4-5 → NAME/claude-sonnet-4-5).
	// An exact id or alias wins over a pattern; a longer pattern over a shorter one.
	Aliases []string `yaml:"aliases"`

	// CLI kinds only. Command defaults to the CLI's usual name (codex, claude, gemini);
	// Args are appended to the ones Tollgate builds; Env adds environment variables;
	// Workdir "" means a fresh empty directory per request (owned by the CLI adapter).
	Command string            `yaml:"command"`
	Args    []string          `yaml:"args"`
	Env     map[string]string `yaml:"env"`
	Workdir string            `yaml:"workdir"`
	// KillGrace is how long a cancelled CLI gets between SIGTERM and SIGKILL; default 3s.
	KillGrace Duration `yaml:"kill_grace"`

	// Resilience (SPEC §10, §11). KeyRateLimit is each key's own budget, on top of RateLimit
	// for the provider; HTTP kinds only.
	KeyRateLimit *RateLimit `yaml:"key_rate_limit"`
	// KeyCooldown is how long a rate-limited key rests when the backend gave no hint; omitted
	// → 10s. MaxKeyCooldown caps every cooldown, hinted or not; omitted → 5m, at least
	// KeyCooldown. HTTP kinds only (the others have no keys).
	KeyCooldown    Duration `yaml:"key_cooldown"`
	MaxKeyCooldown Duration `yaml:"max_key_cooldown"`
	// Retries overrides Limits.Retries for this provider; omitted → Limits.Retries; 0 → none.
	Retries int `yaml:"retries"`
	// AdaptiveLanes lets the gateway lower effective lanes below Lanes when the backend shows
	// it takes fewer (SPEC §11); nil (omitted) means true: read it with Adaptive.
	AdaptiveLanes *bool `yaml:"adaptive_lanes"`
	// LanesProbe is how many successful calls with every effective lane busy earn one lane
	// back; omitted → 20; at least 1.
	LanesProbe int `yaml:"lanes_probe"`
	// Breaker is the provider's circuit breaker; each omitted field takes its default.
	Breaker Breaker `yaml:"breaker"`

	// RefreshModels is how often an HTTP kind re-reads the backend's model list; omitted →
	// 10m; an explicit 0 means "read it once at start". Zero for CLI and fake kinds.
	RefreshModels Duration `yaml:"refresh_models"`

	// Discovered says how auto-discovery found this provider ("env OPENAI_API_KEY",
	// "PATH /usr/bin/codex", "port 127.0.0.1:1234"); "" for configured providers.
	Discovered string `yaml:"-"`
}

// Model is one model of a provider. Capability pointers are nil when unknown (SPEC §6 says
// unknown values are null, never invented).
type Model struct {
	// ID is the backend's model name; the client-facing id is "PROVIDER/ID".
	ID string `yaml:"id"`
	// Keys, when set, are used for this model instead of the provider's keys.
	Keys []string `yaml:"keys"`
	// ModelLanes omitted → the provider's ModelLanes. Must not exceed the provider's Lanes.
	ModelLanes int `yaml:"model_lanes"`
	// Type is what the model serves: "chat" (omitted) or "embedding" (POST /v1/embeddings
	// only; SPEC §19).
	Type string `yaml:"type"`

	ContextWindow   *int  `yaml:"context_window"`
	MaxOutputTokens *int  `yaml:"max_output_tokens"`
	Reasoning       *bool `yaml:"reasoning"`
	Tools           *bool `yaml:"tools"`
	Vision          *bool `yaml:"vision"`
	// Fallbacks are full model ids ("provider/model" or an alias) tried when this model
	// cannot serve a request.
	Fallbacks []string `yaml:"fallbacks"`
	// Price is what the model costs in USD per million tokens, for the spend ledger and
	// budgets (SPEC §18); nil: the catalog's list price for a known cloud model, else 0.
	Price *Price `yaml:"price"`
	// FallbackOn names the failures that send a call to Fallbacks: rate_limited,
	// unavailable (provider down or circuit open), queue_full, queue_timeout. Omitted → all
	// four (when Fallbacks is set; empty otherwise).
	FallbackOn []string `yaml:"fallback_on"`
	// Aliases are extra client-facing names for this model; unique across the config and
	// never equal to a "provider/model" id. One ending in '*' is a pattern: every name it is
	// a prefix of leads here ("claude-*"), unless an exact id, an alias or a longer pattern
	// matches the name.
	Aliases []string `yaml:"aliases"`

	// Fake kind only: scripted behaviour, interpreted by providers/fake (fake.Script). Reply
	// "" lets the fake choose (it echoes the prompt); Fail is one of its fail modes
	// ("rate_limited", "unavailable", "midstream", "truncated", "hang", ...); TokensPerSecond 0
	// is unpaced.
	Reply           string   `yaml:"reply"`
	ReasoningText   string   `yaml:"reasoning_text"`
	FirstTokenDelay Duration `yaml:"first_token_delay"`
	TokensPerSecond float64  `yaml:"tokens_per_second"`
	Fail            string   `yaml:"fail"`
}

// Kind families.
const (
	familyHTTP = iota
	familyCLI
	familyFake
)

type kindInfo struct {
	family     int
	lanes      int
	modelLanes int
	runTimeout time.Duration
}

// kinds is the SPEC §2 defaults table.
var kinds = map[string]kindInfo{
	"openai":     {familyHTTP, 8, 4, 5 * time.Minute},
	"anthropic":  {familyHTTP, 8, 4, 5 * time.Minute},
	"gemini":     {familyHTTP, 8, 4, 5 * time.Minute},
	"deepseek":   {familyHTTP, 8, 4, 5 * time.Minute},
	"qwen":       {familyHTTP, 8, 4, 5 * time.Minute},
	"doubao":     {familyHTTP, 8, 4, 5 * time.Minute},
	"ernie":      {familyHTTP, 8, 4, 5 * time.Minute},
	"nvidia":     {familyHTTP, 4, 2, 10 * time.Minute},
	"lmstudio":   {familyHTTP, 1, 1, 3 * time.Minute},
	"ollama":     {familyHTTP, 1, 1, 3 * time.Minute},
	"codex-cli":  {familyCLI, 3, 1, 5 * time.Minute},
	"claude-cli": {familyCLI, 3, 1, 5 * time.Minute},
	"gemini-cli": {familyCLI, 3, 1, 5 * time.Minute},
	"fake":       {familyFake, 4, 2, time.Minute},
}

// cliCommands is each CLI kind's usual command name.
var cliCommands = map[string]string{
	"codex-cli":  "codex",
	"claude-cli": "claude",
	"gemini-cli": "gemini",
}

// Gateway-wide and per-kind defaults not in the table.
const (
	DefaultListen        = "127.0.0.1:8080"
	defaultMaxRunning    = 10
	defaultMaxAdmitted   = 16
	defaultAffinityTTL   = time.Hour
	defaultAffinityMax   = 100_000
	defaultQueueLength   = 8
	defaultQueueTimeout  = 60 * time.Second
	defaultRetryAfter    = time.Second
	defaultMaxBodyBytes  = 8 << 20
	defaultMaxEventBytes = 8 << 20
	defaultHeaderTimeout = 10 * time.Second
	defaultBodyTimeout   = 30 * time.Second
	defaultIdleTimeout   = 120 * time.Second
	defaultWriteTimeout  = 30 * time.Second
	defaultMaxHeaders    = 64 << 10
	minMaxHeaders        = 1 << 10
	defaultKillGrace     = 3 * time.Second
	defaultRefreshModels = 10 * time.Minute
	defaultDrainDelay    = 5 * time.Second
	defaultDrainGrace    = 30 * time.Second
	minRetryAfter        = time.Second
	maxRetryAfter        = 60 * time.Second
)

// Kinds returns the valid provider kinds, sorted.
func Kinds() []string {
	out := make([]string, 0, len(kinds))
	for k := range kinds {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// IsCLI reports whether kind runs a local coding-agent CLI.
func IsCLI(kind string) bool { k, ok := kinds[kind]; return ok && k.family == familyCLI }

// IsHTTP reports whether kind talks to an HTTP API.
func IsHTTP(kind string) bool { k, ok := kinds[kind]; return ok && k.family == familyHTTP }

// ModelID is the client-facing id of model m of provider p.
func (p *Provider) ModelID(m *Model) string { return p.Name + "/" + m.ID }
