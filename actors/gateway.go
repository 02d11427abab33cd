// Package actors runs Tollgate's admission control as an actor system.
//
// The supervisor actor owns the admission state (the pure policy.Gate: lanes, queues, global
// caps and the priority-fair dispatch) because those rules span providers and must be decided
// in one place, in one order. Under it, one provider actor per provider and one lane actor per
// model run the admitted calls; each call has a request actor that turns a client hang-up or
// a shutdown into cancellation of the backend. Backend I/O never runs inside Receive: the
// HTTP handler pulls the stream, and a stream gives its lanes back to the supervisor only once
// the backend has stopped.
//
//	supervisor ── provider "codex" ── lane "gpt-5-codex" ── request 17
//	           │                   └─ lane "o3"          ── request 18
//	           └─ provider "demo"  ── lane "echo"
package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/actors/policy"
	"github.com/tollgate/tollgate/providers/llm"
)

// Options configure a Gateway. Zero values are documented per field.
type Options struct {
	MaxRunning  int           // global cap on running calls; must be ≥ 1
	MaxAdmitted int           // global cap on running + queued; must be ≥ MaxRunning
	RetryAfter  time.Duration // what "busy" answers advise when nothing better is known; 0 → 1s
	Providers   []Provider
	Logger      zerolog.Logger
	// Now is the clock; nil → time.Now. Tests pass a fake one.
	Now func() time.Time
}

// Provider is one backend with its lanes and queue. Lanes, QueueLength and the timeouts
// must already carry their defaults: the gateway does not invent limits.
type Provider struct {
	Name, Kind   string
	Backend      llm.Backend
	Lanes        int           // ≥ 1
	QueueLength  int           // ≥ 0; 0 means never queue
	QueueTimeout time.Duration // > 0
	RunTimeout   time.Duration // > 0
	RPM          int           // requests per minute; 0 = no rate limit
	Models       []Model
	// Aliases are client-name patterns ending in '*' that lead to this provider's model of
	// the client's name ("claude-*": claude-x → NAME/claude-x); see aliases.go.
	Aliases []string
}

// Model is one model of a provider.
type Model struct {
	Name    string   // the backend's model name; the client's id is "provider/Name"
	Aliases []string // further client-facing ids; one ending in '*' is a pattern (aliases.go)
	Lanes   int      // model_lanes, ≥ 1
	Card    llm.Spec // the model card; Provider, Kind, Lanes, ModelLanes, RunTimeoutMs are filled in
}

// route is where a client-facing model id leads.
type route struct {
	p, m     int
	provider string
	model    string // backend model name
	id       string // canonical client-facing id
	backend  llm.Backend
	timeout  time.Duration
}

// Gateway is the facade the HTTP layer talks to.
type Gateway struct {
	system     *actor.ActorSystem
	supervisor *actor.PID
	dispatch   *poolDispatcher // runs every actor's mailbox
	stopped    chan struct{}   // closed once the supervisor has stopped (Shutdown)
	stopOnce   sync.Once
	table      atomic.Pointer[modelTable] // routes, cards, models; see AddModels
	opts       Options
	nextID     atomic.Uint64
	draining   atomic.Bool
	log        zerolog.Logger
	providers  map[string]*actor.PID // filled by the supervisor before New returns
}

// mailboxThroughput is how many messages an actor handles before yielding its worker;
// protoactor's own default.
const mailboxThroughput = 300

// New validates opts, starts the actor system and returns a running Gateway.
func New(opts Options) (*Gateway, error) {
	if err := validate(&opts); err != nil {
		return nil, err
	}
	g := &Gateway{opts: opts, log: opts.Logger, stopped: make(chan struct{})}
	g.table.Store(newModelTable(&opts))
	// protoactor logs through slog; Tollgate logs through zerolog and reports supervision
	// events itself, so the actor system's own logger is silenced.
	g.system = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	g.dispatch = newPoolDispatcher(mailboxThroughput)
	sup := newSupervisor(g)
	props := actor.PropsFromProducer(func() actor.Actor { return sup.reincarnate() },
		actor.WithSupervisor(providerStrategy()), actor.WithDispatcher(g.dispatch))
	pid, err := g.system.Root.SpawnNamed(props, "supervisor")
	if err != nil {
		return nil, fmt.Errorf("start supervisor: %w", err)
	}
	g.supervisor = pid
	g.providers = sup.providerPIDs()
	return g, nil
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

// Start admits a call and blocks until it is running or turned away. On success the caller
// owns the returned stream and must Close it; that gives the lanes back once the backend has
// stopped. The returned Served describes the call also with an error. If ctx ends first,
// Start withdraws the call and returns ctx's error.
func (g *Gateway) Start(ctx context.Context, model string, prio llm.Priority, req *llm.Request) (llm.Served, error) {
	r, ok := g.table.Load().lookup(model)
	if !ok {
		return llm.Served{}, g.notFound(model)
	}
	sv := llm.Served{Model: r.id, Provider: r.provider}
	if g.draining.Load() {
		return sv, &llm.Error{Kind: llm.KindDraining, Message: "the gateway is shutting down and admits no new requests"}
	}
	breq := *req
	breq.Model = r.model
	c := &call{
		id: policy.ID(g.nextID.Add(1)), ctx: ctx, req: &breq, route: r, prio: prio,
		reply: make(chan admitResult, 1),
	}
	g.system.Root.Send(g.supervisor, c)
	var res admitResult
	select {
	case res = <-c.reply:
	case <-ctx.Done():
		g.system.Root.Send(g.supervisor, &cancelCall{id: c.id})
		res = g.await(c) // the supervisor answers every call exactly once
		if res.stream != nil {
			_ = res.stream.Close() // never opened: this only gives the lanes back
		}
		sv.QueueWait = res.queueWait
		return sv, ctx.Err()
	case <-g.stopped:
		res = g.await(c)
	}
	sv.QueueWait = res.queueWait
	if res.err != nil {
		return sv, res.err
	}
	sv.Attempts = 1
	if err := res.stream.open(); err != nil {
		return sv, err
	}
	sv.Stream = res.stream
	return sv, nil
}

// await waits for a call's one answer. A call sent after the supervisor stopped (Start racing
// Shutdown) reaches nobody; it is answered gateway_draining instead of waiting forever.
func (g *Gateway) await(c *call) admitResult {
	select {
	case res := <-c.reply:
		return res
	case <-g.stopped:
		select {
		case res := <-c.reply: // answered just before the stop
			return res
		default:
			return admitResult{err: &llm.Error{Kind: llm.KindDraining, Message: "the gateway is shutting down"}}
		}
	}
}

func (g *Gateway) notFound(model string) error {
	msg := fmt.Sprintf("model %q does not exist; GET /v1/models lists the available ids (\"provider/model\")", model)
	if p, _, ok := strings.Cut(model, "/"); ok {
		known := false
		for _, pv := range g.opts.Providers {
			known = known || pv.Name == p
		}
		if !known {
			msg = fmt.Sprintf("model %q: no provider named %q; GET /v1/models lists the available ids", model, p)
		}
	}
	return &llm.Error{Kind: llm.KindModelNotFound, Message: msg, Param: "model"}
}

// Models returns the model cards, sorted by id.
func (g *Gateway) Models() []llm.ModelCard { return g.table.Load().cards }

// RetryAfter is the configured default wait for "busy" answers.
func (g *Gateway) RetryAfter() time.Duration { return g.opts.RetryAfter }

// Drain stops admitting new calls; calls already admitted go on.
func (g *Gateway) Drain() { g.draining.Store(true) }

// Draining reports whether Drain was called.
func (g *Gateway) Draining() bool { return g.draining.Load() }

// Shutdown stops the actor system: queued calls are answered gateway_draining, running
// backends are cancelled, and it returns once every actor has stopped or ctx ends.
func (g *Gateway) Shutdown(ctx context.Context) error {
	g.Drain()
	f := g.system.Root.StopFuture(g.supervisor)
	done := make(chan error, 1)
	go func() { done <- f.Wait() }() // exits when the supervisor has stopped
	select {
	case err := <-done:
		g.stopOnce.Do(func() { close(g.stopped) })
		g.system.Shutdown()
		g.dispatch.stop()
		return err
	case <-ctx.Done():
		g.dispatch.stop() // what still runs gets goroutines of its own from now on
		return ctx.Err()
	}
}

// Inject makes the targeted provider or lane actor panic, to exercise supervision.
func (g *Gateway) Inject(f Fault) error {
	pid, ok := g.providers[f.Provider]
	if !ok {
		return fmt.Errorf("inject: no provider %q", f.Provider)
	}
	g.system.Root.Send(pid, &panicNow{model: f.Model})
	return nil
}
