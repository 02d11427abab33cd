// Package actors runs Tollgate's admission control as an actor system, in the shape of
// SPEC §2's design card:
//
//	supervisor ── provider "codex" ── lane "gpt-5-codex" ── request 17
//	  global      queue, deadlines,  │  that model's       one call: its
//	  caps,       rate limiter,      │  running calls      cancellation and
//	  class       model choice       └─ lane "o3" ── ...   lane hand-back
//	  order,
//	  round-robin
//
// The supervisor owns what spans providers (policy.Dispatcher); each provider actor owns
// its queue and limiter (policy.Provider); they agree through the grant protocol of
// package policy. A model-lane actor per model runs that model's calls and arms their run
// timers; each call has a request actor that turns a client hang-up or a shutdown into
// cancellation of its backend. Backend I/O never runs inside Receive: the HTTP handler
// pulls the stream, and a stream gives its lanes back only once the backend has stopped.
// docs/architecture.md draws the messages and the supervision.
package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/actors/policy"
	"github.com/tollgate/tollgate/actors/policy/affinity"
	"github.com/tollgate/tollgate/actors/policy/breaker"
	"github.com/tollgate/tollgate/actors/policy/tokens"
	"github.com/tollgate/tollgate/actors/replicas"
	"github.com/tollgate/tollgate/providers/llm"
	routepkg "github.com/tollgate/tollgate/providers/route"
)

// Options configure a Gateway. Zero values are documented per field.
type Options struct {
	MaxRunning  int           // global cap on running calls; must be ≥ 1
	MaxAdmitted int           // global cap on running + queued; must be ≥ MaxRunning
	RetryAfter  time.Duration // what "busy" answers advise when nothing better is known; 0 → 1s
	Providers   []Provider
	// Routes are model ids of their own that pick a real model per request (SPEC §12); a
	// route's name must not be a model id or an alias.
	Routes []*routepkg.Route
	Logger zerolog.Logger
	// Observer is told of retries, fallbacks, the circuit breakers and learned lanes (for
	// metrics); nil tells no one.
	Observer Observer
	// Now is the clock; nil → time.Now. Tests pass a fake one.
	Now func() time.Time
	// Shared, when set, is the state this gateway shares with other replicas (SPEC §17,
	// shared.go): every call takes its leases there too before its backend is opened.
	// Nil: the gateway is alone.
	Shared replicas.Shared
	// Affinity is session affinity's table (SPEC §19): how long a conversation's binding
	// is kept after its last success, and how many are kept; zero fields take
	// affinity.DefaultTTL and DefaultMax. With Shared, the table is this replica's cache
	// of the bindings the replicas share (affinity.go).
	Affinity affinity.Config
}

// Provider is one backend with its lanes and queue. Lanes, QueueLength and the timeouts
// must already carry their defaults: the gateway does not invent limits. The resilience
// settings (SPEC §10, §11) document their zero values.
type Provider struct {
	Name, Kind   string
	Backend      llm.Backend
	Lanes        int           // ≥ 1
	QueueLength  int           // ≥ 0; 0 means never queue
	QueueTimeout time.Duration // > 0
	RunTimeout   time.Duration // > 0
	RateLimit    RateLimit     // rate_limit; zero: none
	Models       []Model
	// Aliases are client-name patterns ending in '*' that lead to this provider's model of
	// the client's name ("claude-*": claude-x → NAME/claude-x); see aliases.go.
	Aliases []string

	// Keys is how many API keys the provider has (for models without keys of their own); 0
	// means none: a rate limit then cools no key (there is none to rest), and the call backs
	// off instead. With a backend that implements llm.KeyedBackend, every call names its key.
	Keys int
	// KeyIDs name the keys, in the backend's order, by something that is not the key (a
	// fingerprint): a reload carries a cooling key's cooldown over when its name stays. Nil:
	// keys are named by their position.
	KeyIDs []string
	// KeyRateLimit is each key's own budget (key_rate_limit); zero: none.
	KeyRateLimit RateLimit
	// KeyCooldown is how long a key rate-limited without a hint rests; MaxKeyCooldown caps
	// every cooldown. 0 → 10s and 5m (keys.DefaultCooldown, DefaultMaxCooldown).
	KeyCooldown, MaxKeyCooldown time.Duration
	// Retries is how many extra attempts a call makes before its first byte reached the
	// client; 0 means none (the config's default of 2 is its own).
	Retries int
	// MaxRetryWait is the longest wait before a retry; 0 → 2s. RetryBudget is the share of
	// the provider's calls over the last 10 s that may be retries, on top of 3 a second;
	// 0 → 0.2.
	MaxRetryWait time.Duration
	RetryBudget  float64
	// Breaker is the provider's circuit breaker; zero fields take breaker's defaults.
	Breaker breaker.Config
	// FixedLanes turns learned lanes off (adaptive_lanes: false): the effective lanes are
	// always Lanes. LanesProbe is how many successes with every lane busy earn a lane back;
	// 0 → 20.
	FixedLanes bool
	LanesProbe int
}

// RateLimit is one rate limit: requests and tokens per minute, and the burst of the request
// bucket; a zero dimension does not limit.
type RateLimit = tokens.Limit

// Model is one model of a provider.
type Model struct {
	Name    string   // the backend's model name; the client's id is "provider/Name"
	Aliases []string // further client-facing ids; one ending in '*' is a pattern (aliases.go)
	Lanes   int      // model_lanes, ≥ 1
	Card    llm.Spec // the model card; Provider, Kind, Lanes, ModelLanes, RunTimeoutMs are filled in
	// OwnKeys says the model has API keys of its own (the backend's Keys(Name) of them): they
	// are kept apart from the provider's, and the model learns its own model lanes.
	OwnKeys bool
	KeyIDs  []string // the model's own keys' names, as Provider.KeyIDs
	// Fallbacks are model ids (or aliases) tried in order when this model cannot serve a
	// call for one of the reasons in FallbackOn; the card lists them.
	Fallbacks  []string
	FallbackOn FallbackOn
}

// FallbackOn is the set of failures that send a call to its model's fallbacks (SPEC §10
// fallback_on). The zero value is all four, the configuration's default.
type FallbackOn uint8

const (
	OnRateLimited  FallbackOn = 1 << iota // the model's attempts ended in a rate limit
	OnUnavailable                         // the provider is down, or its circuit is open
	OnQueueFull                           // provider_queue_full
	OnQueueTimeout                        // provider_queue_timeout
)

// route is where a client-facing model id leads.
type route struct {
	p, m     int
	slot     *slot // provider p's
	provider string
	kind     string // the provider's kind
	typ      string // the model's type (llm.Spec.ModelType)
	model    string // backend model name
	id       string // canonical client-facing id
	backend  llm.Backend
	keyed    llm.KeyedBackend // backend, when it lets the gateway choose each call's key
	timeout  time.Duration
	// queueTimeout is the provider's queue_timeout: how long a call may wait for its key's
	// own tokens (clientrate.go) before it comes to the provider's queue
	queueTimeout time.Duration
	window       int  // the model's context window, for token estimates; 0 unknown
	counts       bool // a tpm bucket counts this call's tokens: estimate them
	fallback     []string
	on           FallbackOn
}

// Gateway is the facade the HTTP layer talks to.
type Gateway struct {
	system     *actor.ActorSystem
	supervisor *actor.PID
	slots      slotList // the providers by slot (slots.go); grown by Reconfigure
	dispatch   *poolDispatcher
	mailbox    actor.MailboxProducer // every actor's mailbox (newGateway)

	table   atomic.Pointer[modelTable] // routes, cards, models; see AddModels
	tableMu sync.Mutex                 // serializes the copy-on-write updates of table
	// changeMu serializes the changes of what is served (AddModels, Reconfigure), each
	// from its caller's goroutine; it is never held inside an actor.
	changeMu sync.Mutex
	caps     atomic.Pointer[caps] // the gateway-wide settings in force
	// sessions binds conversations to the key and model that served them (affinity.go).
	sessions *sessions

	// opts are the options New was given; what a reload changes (the caps, the providers,
	// the routes) is read from caps, the slots and the table instead.
	opts     Options
	now      func() time.Time // the gateway's clock: opts.Now
	log      zerolog.Logger
	nextID   atomic.Uint64
	draining atomic.Bool
	leaseGen atomic.Uint64  // counts LeaseNotice calls: a refusal older than a notice is retried
	clients  clientTally    // each client's calls waiting, for max_queued (clients.go)
	rates    clientRates    // each client's own rate_limit buckets (clientrate.go)
	running  *policy.Slots  // each capped client's calls running, for max_running (clients.go)
	shares   *policy.Shares // each client's service at max_running, for its fair share of it
	started  atomic.Bool    // New has returned: a provider spawned since reads the shared state itself

	idle      chan struct{} // closed by the supervisor once a drain has left nothing running
	stopped   chan struct{} // closed once the actors have stopped (Shutdown)
	stopOnce  sync.Once
	sysOnce   sync.Once     // the actor system is shut down once, however often Shutdown is called
	failed    chan struct{} // closed when the supervisor's restart budget ran out
	failOnce  sync.Once
	failCause atomic.Value // error: why failed was closed

	faults *faultPlan // a test seam (faults_inject.go); nil in production builds
}

// mailboxThroughput is how many messages an actor handles before yielding its worker;
// protoactor's own default.
const mailboxThroughput = 300

// New validates opts, starts the actor system and returns a running Gateway.
func New(opts Options) (*Gateway, error) { return newGateway(opts) }

// newGateway is New with mailbox middlewares on every actor's mailbox: a test's seam (the
// admission benchmark counts the messages a call costs); production passes none.
func newGateway(opts Options, mw ...actor.MailboxMiddleware) (*Gateway, error) {
	if err := validate(&opts); err != nil {
		return nil, err
	}
	g := &Gateway{opts: opts, now: opts.Now, log: opts.Logger, idle: make(chan struct{}), stopped: make(chan struct{}),
		failed: make(chan struct{}), faults: newFaultPlan(), mailbox: actor.Unbounded(mw...),
		sessions: newSessions(opts.Affinity, opts.Shared, opts.Logger)}
	g.running = newClientSlots(g)
	g.shares = policy.NewShares()
	g.rates.now, g.rates.stopped = g.now, g.stopped
	slots := make([]*slot, len(opts.Providers))
	for p, pv := range opts.Providers {
		slots[p] = &slot{p: p, name: pv.Name}
	}
	g.slots.Store(&slots)
	g.caps.Store(capsOf(&opts))
	g.table.Store(newModelTable(&opts, slots))
	// protoactor logs through slog; Tollgate logs through zerolog and reports supervision
	// events itself, so the actor system's own logger is silenced.
	g.system = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	g.dispatch = newPoolDispatcher(mailboxThroughput)
	spawned := make(chan []*actor.PID, 1)
	sup := newSupervisor(g, spawned)
	props := g.props(func() actor.Actor { return sup }, actor.WithGuardian(newSupervisorGuardian(g)))
	pid, err := g.system.Root.SpawnNamed(props, "supervisor")
	if err != nil {
		return nil, fmt.Errorf("start supervisor: %w", err)
	}
	g.supervisor = pid
	<-spawned // the supervisor spawns its providers before it handles anything else
	g.readSharedAtStart()
	g.sessions.start()
	return g, nil
}

// props are the props of one of the gateway's actors: its mailbox on the gateway's pool of
// workers, then opts (which may replace the mailbox).
func (g *Gateway) props(producer actor.Producer, opts ...actor.PropsOption) *actor.Props {
	return actor.PropsFromProducer(producer, append([]actor.PropsOption{actor.WithDispatcher(g.dispatch),
		actor.WithMailbox(g.mailbox)}, opts...)...)
}

func validate(o *Options) error {
	var errs []error
	if o.MaxRunning < 1 {
		errs = append(errs, fmt.Errorf("max_running must be at least 1, got %d", o.MaxRunning))
	}
	if o.MaxAdmitted < o.MaxRunning {
		errs = append(errs, fmt.Errorf("max_admitted (%d) must be at least max_running (%d)", o.MaxAdmitted, o.MaxRunning))
	}
	if o.RetryAfter <= 0 {
		o.RetryAfter = time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	// The gateway keeps what it is given: copies, so that a caller reusing its slices for
	// the next reload changes nothing the actors hold.
	o.Providers = slices.Clone(o.Providers)
	for i := range o.Providers {
		o.Providers[i].Models = slices.Clone(o.Providers[i].Models)
	}
	seen := map[string]bool{}
	for _, p := range o.Providers {
		switch {
		case p.Name == "" || strings.Contains(p.Name, "/"):
			errs = append(errs, fmt.Errorf("provider %q: name must be non-empty and contain no '/'", p.Name))
		case seen[p.Name]:
			errs = append(errs, fmt.Errorf("provider %q: duplicate name", p.Name))
		case p.Backend == nil:
			errs = append(errs, fmt.Errorf("provider %q: no backend", p.Name))
		case p.Lanes < 1 || p.QueueLength < 0 || p.QueueTimeout <= 0 || p.RunTimeout <= 0:
			errs = append(errs, fmt.Errorf("provider %q: lanes %d, queue_length %d, queue_timeout %s, run_timeout %s: all must be positive",
				p.Name, p.Lanes, p.QueueLength, p.QueueTimeout, p.RunTimeout))
		case p.RateLimit.RPM < 0 || p.RateLimit.TPM < 0 || p.RateLimit.Burst < 0 ||
			p.KeyRateLimit.RPM < 0 || p.KeyRateLimit.TPM < 0 || p.KeyRateLimit.Burst < 0:
			errs = append(errs, fmt.Errorf("provider %q: rate limits (rpm, tpm, burst) must not be negative", p.Name))
		case p.Retries < 0 || p.MaxRetryWait < 0 || p.RetryBudget < 0 || p.RetryBudget > 1 || p.LanesProbe < 0 || p.Keys < 0:
			errs = append(errs, fmt.Errorf("provider %q: retries %d, max_retry_wait %s, retry_budget %g, lanes_probe %d, keys %d: none may be negative, and the budget is a share",
				p.Name, p.Retries, p.MaxRetryWait, p.RetryBudget, p.LanesProbe, p.Keys))
		}
		seen[p.Name] = true
		for _, m := range p.Models {
			if m.Name == "" || m.Lanes < 1 {
				errs = append(errs, fmt.Errorf("provider %q: model %q: needs a name and model_lanes ≥ 1", p.Name, m.Name))
			}
		}
	}
	return errors.Join(errs...)
}

// caps are the gateway-wide settings a reload may change.
type caps struct {
	limits     policy.Limits
	retryAfter time.Duration
}

func capsOf(o *Options) *caps {
	return &caps{limits: policy.Limits{MaxRunning: o.MaxRunning, MaxAdmitted: o.MaxAdmitted}, retryAfter: o.RetryAfter}
}

// refusing is the answer to a call the gateway refuses before any actor sees it, or nil.
func (g *Gateway) refusing(r *route) error {
	switch {
	case g.draining.Load():
		return &llm.Error{Kind: llm.KindDraining, Message: "the gateway is shutting down and admits no new requests"}
	case g.Failed() != nil:
		return &llm.Error{Kind: llm.KindDraining, Message: "the gateway is stopping after an internal failure (see its log)"}
	case r.slot.down.Load():
		return providerDown(r.provider)
	case r.slot.retired.Load():
		return g.table.Load().notFound(r.id) // removed by a reload after Start looked it up
	}
	return nil
}

// providerDown answers calls for a provider taken out of service after its actors failed
// repeatedly (see supervision.go). Waiting does not help, but an operator's restart does:
// the SDKs' own retries of a 503 are harmless and short.
func providerDown(name string) *llm.Error {
	return &llm.Error{Kind: llm.KindProviderUnavailable, Provider: name, RetryAfter: time.Minute,
		Message: "provider " + name + " is out of service: its actors failed repeatedly (see the gateway's log); a reload (SIGHUP, POST /admin/reload) or a restart of the gateway brings it back"}
}

// await waits for the call's one answer. A call sent after the actors stopped (stopped
// closed: Start racing Shutdown) reaches nobody; it is answered gateway_draining instead of
// waiting forever.
func (c *call) await(stopped <-chan struct{}) admitResult {
	select {
	case res := <-c.reply:
		return res
	case <-stopped:
		select {
		case res := <-c.reply: // answered just before the stop
			return res
		default:
			return admitResult{err: &llm.Error{Kind: llm.KindDraining, Message: "the gateway is shutting down"}}
		}
	}
}

func (t *modelTable) notFound(model string) *llm.Error {
	msg := fmt.Sprintf("model %q does not exist; GET /v1/models lists the available ids (\"provider/model\")", model)
	if p, _, ok := strings.Cut(model, "/"); ok {
		known := false
		for _, pv := range t.provs {
			known = known || pv.live && pv.Name == p
		}
		if !known {
			msg = fmt.Sprintf("model %q: no provider named %q; GET /v1/models lists the available ids", model, p)
		}
	}
	return &llm.Error{Kind: llm.KindModelNotFound, Message: msg, Param: "model"}
}

// Models returns the model cards, sorted by id.
func (g *Gateway) Models() []llm.ModelCard { return g.table.Load().cards }

// Resolve returns the model_not_found error Start would answer a call on model with, or
// nil when model names a model, alias or route; it admits and starts nothing.
func (g *Gateway) Resolve(model string, req *llm.Request) error {
	if _, ok := g.table.Load().resolve(model, req); !ok {
		return g.table.Load().notFound(model)
	}
	return nil
}

// RetryAfter is the configured default wait for "busy" answers.
func (g *Gateway) RetryAfter() time.Duration { return g.caps.Load().retryAfter }

// Drain stops admitting new calls; calls already admitted go on.
func (g *Gateway) Drain() { g.draining.Store(true) }

// Draining reports whether Drain was called.
func (g *Gateway) Draining() bool { return g.draining.Load() }

// OutOfService names the providers taken out of service after their actors failed past
// their restart budget, and counts the providers still serving; removed ones are neither.
func (g *Gateway) OutOfService() (down []string, serving int) {
	for _, sp := range g.table.Load().provs {
		switch {
		case !sp.live: // removed, or replaced by a reload that rebuilt it
		case sp.slot.down.Load():
			down = append(down, sp.Name)
		default:
			serving++
		}
	}
	return down, serving
}

// Failed returns why the gateway can no longer admit anything, or nil: the supervisor's
// restart budget ran out (a fault that repeats). cmd/tollgate then drains and exits with
// status 1, so that whatever runs the process starts a fresh one.
func (g *Gateway) Failed() error {
	select {
	case <-g.failed:
		err, _ := g.failCause.Load().(error)
		return err
	default:
		return nil
	}
}

// FailedC is closed when Failed starts returning an error.
func (g *Gateway) FailedC() <-chan struct{} { return g.failed }

// fail marks the gateway failed with cause, once.
func (g *Gateway) fail(cause error) {
	g.failOnce.Do(func() {
		g.failCause.Store(cause)
		close(g.failed)
	})
}

// Shutdown stops the gateway: every waiting call is answered gateway_draining, every running
// backend is stopped, and once nothing runs (or ctx ends) the actors stop. It returns ctx's
// error if ctx ended first.
func (g *Gateway) Shutdown(ctx context.Context) error {
	g.Drain()
	send(g.system.Root, g.supervisor, &drainAll{})
	var err error
	select {
	case <-g.idle:
	case <-ctx.Done():
		err = ctx.Err()
	}
	f := g.system.Root.StopFuture(g.supervisor)
	done := make(chan error, 1)
	go func() { done <- f.Wait() }() // exits when the supervisor has stopped
	select {
	case werr := <-done:
		g.stopOnce.Do(func() { close(g.stopped) })
		g.sysOnce.Do(g.system.Shutdown)
		g.dispatch.stop()
		if err == nil {
			err = werr
		}
	case <-ctx.Done():
		g.stopOnce.Do(func() { close(g.stopped) })
		g.dispatch.stop() // what still runs gets goroutines of its own from now on
		err = ctx.Err()
	}
	g.sessions.stop() // the bindings' write-through (affinityshare.go)
	return err
}

// providerIndex returns the slot of provider name as served now, or -1.
func (t *modelTable) providerIndex(name string) int {
	for i, pv := range t.provs {
		if pv.live && pv.Name == name {
			return i
		}
	}
	return -1
}
