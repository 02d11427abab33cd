// Package cluster is the lease engine that lets replicas naming one Redis share their limits
// (SPEC §17): leases on lanes and caps taken all or none by Lua scripts (lua/), renewed while
// a call runs and reclaimed once expired; rpm and tpm buckets as GCRA on Redis's clock; key
// cooldowns, open breakers and learned lanes announced to the other replicas over pub/sub;
// and the outage rule each replica runs on while Redis is away (outage.go). The lease
// layout, the scripts and the failure table are in docs/architecture.md, "Several replicas".
package cluster

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"github.com/rs/zerolog"
)

// Options configure an Engine. The config package's cluster section fills the first six,
// Timeout and Strict; the wiring adds MaxRun and Notify.
type Options struct {
	// Addr is the Redis server's host:port. Required.
	Addr string
	// Password is sent with AUTH; "" sends none. It never appears in a log or an error.
	Password string
	// DB is the Redis database to select; 0 is Redis's default.
	DB int
	// TLS, when not nil, connects with TLS using it; nil connects in plain text.
	TLS *tls.Config
	// Replica names this process among the replicas sharing the Redis. Required; two
	// processes must not share one (the engine reports it in Status.DuplicateName).
	Replica string
	// LeaseTTL is how long a lease lives unrenewed: a replica that dies gives its slots
	// back within it. Required, at least 50ms; leases are renewed every LeaseTTL/5.
	LeaseTTL time.Duration
	// MaxRun is the longest one call can hold its lease (the longest run_timeout plus the
	// kill grace): after an outage began, calls started before it may still run this long
	// on any replica, and the outage rule counts them until then (Settling). Required, at
	// least LeaseTTL.
	MaxRun time.Duration
	// Timeout bounds one Redis round trip: past it, Redis counts as away (the heartbeat
	// decides). 0 means LeaseTTL/5, at least 10ms and at most 2s; otherwise at least 10ms
	// and at most LeaseTTL/2. A Redis slower than this is taken for an absent one.
	Timeout time.Duration
	// Strict keeps the stricter outage rule: for lease_ttl only the slots this replica
	// still holds, then min(share, held) until MaxRun has passed, then the share (Holding,
	// Settling, Alone). False (the default): the share at once, less what the last view
	// showed the others holding beyond theirs (docs/architecture.md, the outage rule).
	Strict bool
	// Prefix is the hash tag of every key and the channel ({Prefix}:...); "" means
	// "tollgate". Replicas share limits exactly when they name the same Redis, DB and Prefix.
	Prefix string
	// Notify receives the engine's events (Event). It is called from the engine's own
	// goroutines and from Release, so it must not block and must not call the Engine:
	// an actor hands it to its mailbox. Nil: events are dropped.
	Notify func(Event)
	// Logger gets the phase changes (at warn and error level: they are loud on purpose)
	// and the problems the engine works around.
	Logger zerolog.Logger
	// Now is the local clock; nil means time.Now. Only intervals measured on it matter
	// (Go's monotonic reading); lease expiry is the Redis server's clock.
	Now func() time.Time
}

// timings are derived from LeaseTTL once.
type timings struct {
	ttl       time.Duration
	op        time.Duration // one Redis round trip's bound; past it Redis counts as away
	heartbeat time.Duration // renew every lease, say this replica is alive, refresh the view
	tick      time.Duration // probe while away, Poll events, time-driven phase changes
	margin    time.Duration // kept off a lease's local validity, for clock rate drift
	// silent: a heartbeat older than this (on the server's clock) is one that was missed:
	// its replica may be on the outage rule, and the acquire script keeps its share free.
	// A heartbeat is sent heartbeat after the last one was, and runs within op of it.
	silent time.Duration
	// horizon: how long after its last heartbeat a silent replica's share is kept free;
	// past it, it counts as dead (lease_ttl + MaxRun).
	horizon time.Duration
}

func newTimings(ttl, timeout, maxRun time.Duration) timings {
	t := timings{ttl: ttl, op: timeout, heartbeat: ttl / 5, tick: min(max(ttl/10, 10*time.Millisecond), time.Second), margin: ttl / 20}
	if t.op == 0 {
		t.op = min(max(ttl/5, 10*time.Millisecond), 2*time.Second)
	}
	t.silent = t.heartbeat + t.op + 2*t.margin
	t.horizon = ttl + maxRun
	return t
}

// Engine shares one replica's lanes, caps, rate limits, key cooldowns and learned lanes
// with every other replica that names the same Redis (SPEC §17). Its methods are safe for
// concurrent use.
type Engine struct {
	o           Options
	t           timings
	rdb         *redis.Client
	ks          keyspace
	incarnation string
	log         zerolog.Logger

	mu       sync.Mutex
	out      *outage   // nil: Shared
	rejoined time.Time // non-zero: Rejoining (out is still the rule a call must pass)
	beating  bool      // a heartbeat is in flight: releases wait for it (no resurrection)
	lastBeat time.Time
	// announced: a heartbeat said this replica alive since it started or last adopted (so
	// one that does not find that in Redis finds Redis lost it, and only registers the
	// calls: heartbeat.lua's mode 2).
	announced bool
	known     []string // replicas alive at the last heartbeat, this one included
	ages      map[string]time.Duration
	seq       uint64
	// execBound: the latest local time a heartbeat of this replica may have run in Redis
	// (a reply's arrival, or a heartbeat given up at its deadline). From execBound +
	// silent (+ margin) on, every peer's acquire keeps this replica's shares free.
	execBound time.Time
	beatRedis int64         // the server's clock (ms) at the last heartbeat
	beatSent  time.Time     // when it was sent
	beatRTT   time.Duration // and how long its answer took
	// The view: per scope, per other replica, its entries' deadlines (first seen + MaxRun),
	// refreshed by every heartbeat; firstSeen remembers when each entry was first seen.
	view      map[string]map[string][]time.Time
	viewAt    time.Time
	firstSeen map[string]time.Time
	leases    map[string]*Lease // this replica's running calls, by member
	running   map[string]int    // per scope: calls of this replica running in it
	pending   []entry           // ended calls whose entries may still be in Redis
	folds     []fold            // outage tokens to charge to the shared buckets
	local     map[string]*localBucket
	status    Status
	closed    bool
	queued    []Event // notified by unlock, never under the lock

	stop chan struct{}
	kick chan struct{} // a round trip failed: heartbeat now (buffered, 1)
	wg   sync.WaitGroup
	ps   *redis.PubSub
}

// entry is one lease's entries in Redis: the member in each of its scopes.
type entry struct {
	member string
	scopes []string
	valid  time.Time // local time until which Redis counts it; zero: not known to be there
}

// ErrUnavailable is what the shared-state calls (Cool, Learn, ...) answer while Redis is
// away: the caller's own local rule stands, and nothing is shared until it returns.
var ErrUnavailable = errors.New("cluster: Redis unreachable")

// ErrClosed is Acquire's answer after Close.
var ErrClosed = errors.New("cluster: engine closed")

// New connects to Redis, says this replica is alive and starts the engine's two
// goroutines (the heartbeat loop and the pub/sub reader; both exit in Close). A Redis that
// does not answer within the first round trip's bound is no error: the engine starts on
// the outage rule, knowing no other replica (see the failure table), and joins when Redis
// answers.
func New(ctx context.Context, o Options) (*Engine, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	if o.Prefix == "" {
		o.Prefix = "tollgate"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	quietOnce.Do(func() { redis.SetLogger(quiet{}) })
	var inc [8]byte
	_, _ = rand.Read(inc[:]) // never fails (crypto/rand)
	t := newTimings(o.LeaseTTL, o.Timeout, o.MaxRun)
	e := &Engine{o: o, t: t, ks: newKeyspace(o.Prefix), incarnation: hex.EncodeToString(inc[:]),
		log:    o.Logger.With().Str("replica", o.Replica).Logger(),
		leases: map[string]*Lease{}, running: map[string]int{}, stop: make(chan struct{}), kick: make(chan struct{}, 1)}
	e.rdb = redis.NewClient(&redis.Options{
		Addr: o.Addr, Password: o.Password, DB: o.DB, TLSConfig: o.TLS, Protocol: 2,
		DialTimeout: t.op, ReadTimeout: t.op, WriteTimeout: t.op, PoolTimeout: t.op,
		ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1, DisableIdentity: true, PoolSize: 16,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
	// Until Redis first answers, this replica knows no peer and no earlier call: it starts
	// on its shares with alive = 1, and its first heartbeat is a rejoin.
	e.out = &outage{since: o.Now(), ttl: t.ttl, maxRun: o.MaxRun, alive: 1, blind: true}
	e.status = Status{Replica: o.Replica, Phase: Alone, ReplicasAlive: 1, Since: o.Now()}
	if err := e.firstBeat(ctx); err != nil {
		e.log.Error().Err(err).Msg("cluster: Redis unreachable at start: this replica knows no other, " +
			"and enforces its whole limits (alive = 1) until Redis answers")
	}
	e.ps = e.rdb.Subscribe(context.WithoutCancel(ctx), e.ks.events())
	e.wg.Add(2)
	go e.loop()
	go e.listen()
	return e, nil
}

// firstBeat tries the first heartbeat for up to lease_ttl (each try bounded by one round
// trip's): a Redis slow to answer a starting replica (a loaded host) is not taken for an
// absent one, since a replica that starts blind runs its whole limits beside its peers.
func (e *Engine) firstBeat(ctx context.Context) error {
	deadline := e.now().Add(e.t.ttl)
	tick := time.NewTicker(e.t.tick)
	defer tick.Stop()
	for {
		err := e.heartbeat(ctx)
		if err == nil || !e.now().Before(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-tick.C:
		}
	}
}

// go-redis logs its own view of failures (a failed dial, a lost pub/sub connection)
// through one process-wide logger, to stderr by default. The engine logs every failure
// that changes what it does, with its cause, on its own logger; the library's lines are
// dropped.
var quietOnce sync.Once

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func (o *Options) check() error {
	var errs []error
	if o.Addr == "" {
		errs = append(errs, errors.New("cluster: Addr is required"))
	}
	if err := checkName("replica", o.Replica); err != nil {
		errs = append(errs, fmt.Errorf("cluster: %w", err))
	}
	if o.LeaseTTL < 50*time.Millisecond {
		errs = append(errs, fmt.Errorf("cluster: LeaseTTL must be at least 50ms, got %s", o.LeaseTTL))
	}
	if o.MaxRun < o.LeaseTTL {
		errs = append(errs, fmt.Errorf("cluster: MaxRun (%s) must be at least LeaseTTL (%s)", o.MaxRun, o.LeaseTTL))
	}
	if o.Timeout != 0 && (o.Timeout < 10*time.Millisecond || o.Timeout > o.LeaseTTL/2) {
		errs = append(errs, fmt.Errorf("cluster: Timeout must be 0 (LeaseTTL/5) or between 10ms and LeaseTTL/2 (%s), got %s", o.LeaseTTL/2, o.Timeout))
	}
	if o.DB < 0 {
		errs = append(errs, fmt.Errorf("cluster: DB must be 0 or more, got %d", o.DB))
	}
	return errors.Join(errs...)
}

func (e *Engine) now() time.Time { return e.o.Now() }

// ended reports whether the caller's ctx is over: a round trip cut by its deadline fails
// with an i/o timeout a moment before ctx.Err says so, and is no sign of Redis's health.
func ended(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

func (e *Engine) notify(ev Event) {
	if e.o.Notify != nil {
		e.o.Notify(ev)
	}
}

// Close stops the engine's goroutines, releases every lease still held and takes this
// replica out of the alive set (so peers' shares grow at once), each bounded by one round
// trip, and closes the connections. Leases released after Close do nothing.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	for _, l := range e.leases {
		l.released.Store(true)
		e.pending = append(e.pending, l.entry)
	}
	clear(e.leases)
	pending, down := e.pending, e.out != nil && e.rejoined.IsZero()
	e.pending = nil
	e.mu.Unlock()
	close(e.stop)
	_ = e.ps.Close()
	e.wg.Wait()
	if !down {
		ctx, cancel := context.WithTimeout(context.Background(), e.t.op)
		_ = e.release(ctx, pending)
		e.rdb.ZRem(ctx, e.ks.replicas(), e.o.Replica)
		cancel()
	}
	return e.rdb.Close()
}

// loop runs the heartbeat while Redis answers, the probe while it does not, the Poll
// events and the time-driven phase changes. It exits when Close closes stop.
func (e *Engine) loop() {
	defer e.wg.Done()
	tick := time.NewTicker(e.t.tick)
	defer tick.Stop()
	// The heartbeat has its own timer, due heartbeat after the last one was sent: the
	// peers take a heartbeat older than timings.silent for a missed one.
	beat := time.NewTimer(e.t.heartbeat)
	defer beat.Stop()
	for {
		kicked, ticked := false, false
		select {
		case <-e.stop:
			return
		case <-tick.C:
			ticked = true
		case <-beat.C:
		case <-e.kick:
			kicked = true
		}
		e.mu.Lock()
		// Away: probe every tick; Rejoining: look for the peers every tick.
		due := kicked || e.out != nil || e.now().Sub(e.lastBeat) >= e.t.heartbeat
		if e.out != nil {
			e.setPhaseLocked(e.phaseLocked(e.now()), nil)
		}
		e.unlock()
		if due {
			ctx, cancel := context.WithCancel(context.Background())
			_ = e.heartbeat(ctx) // a failure is recorded by heartbeat itself
			cancel()
			e.mu.Lock()
			next := e.t.heartbeat - e.now().Sub(e.lastBeat)
			if e.out != nil && e.rejoined.IsZero() {
				next = e.t.heartbeat // away: the ticks probe
			}
			e.mu.Unlock()
			beat.Reset(max(next, time.Millisecond))
		}
		if ticked {
			e.notify(Event{Kind: Poll, Replica: e.o.Replica})
		}
	}
}

// kickLoop asks the loop for a heartbeat at once: a round trip failed, and the heartbeat
// decides whether Redis is away.
func (e *Engine) kickLoop() {
	select {
	case e.kick <- struct{}{}:
	default: // one is already asked for
	}
}

// listen hands every notice published by the replicas to Notify. It exits when Close
// closes the subscription (which closes its channel). go-redis re-subscribes by itself
// after a lost connection, and its confirmation comes on this channel: every one after the
// first is told as Resubscribed, since notices published meanwhile are lost (Poll covers
// the leases; the gateway reads the rest).
func (e *Engine) listen() {
	defer e.wg.Done()
	ch := e.ps.ChannelWithSubscriptions(redis.WithChannelHealthCheckInterval(e.t.heartbeat),
		redis.WithChannelSendTimeout(e.t.op))
	subscribed := false
	for m := range ch {
		switch msg := m.(type) {
		case *redis.Subscription:
			if msg.Kind != "subscribe" {
				continue
			}
			if subscribed {
				e.notify(Event{Kind: Resubscribed, Replica: e.o.Replica})
			}
			subscribed = true
		case *redis.Message:
			ev, err := decodeEvent(msg.Payload)
			if err != nil {
				e.log.Warn().Err(err).Msg("cluster: ignored a notice on the events channel")
				continue
			}
			// This replica's own notices come back too: a slot its own acquire reclaimed
			// may serve one of its waiting calls. A Freed of its own release is then heard
			// twice (at once, and from here); a notice only ever means "try again".
			e.notify(ev)
		}
	}
}

// phaseLocked is the rule in force at now.
func (e *Engine) phaseLocked(now time.Time) Phase {
	switch {
	case e.out == nil:
		return Shared
	case !e.rejoined.IsZero():
		return Rejoining
	}
	return e.out.phase(now)
}

// setPhaseLocked records p in the health state; a change is logged and notified.
func (e *Engine) setPhaseLocked(p Phase, cause error) {
	h := &e.status
	h.Redis = e.out == nil || !e.rejoined.IsZero()
	if cause != nil {
		h.LastError = cause.Error()
	}
	if p == h.Phase {
		return
	}
	from := h.Phase
	h.Phase, h.Since = p, e.now()
	ev := e.log.Warn()
	switch {
	case p == Holding || p == Settling || p == Alone:
		ev = e.log.Error()
	case p == Shared && h.Beats <= 1: // the start, not a recovery
		ev = e.log.Info()
	}
	ev = ev.Str("from", from.String()).Str("phase", p.String()).Int("replicas_alive", h.ReplicasAlive)
	if cause != nil {
		ev = ev.AnErr("cause", cause)
	}
	ev.Msg("cluster: " + phaseLine[p])
	e.queued = append(e.queued, Event{Kind: Changed, Replica: e.o.Replica, Redis: h.Redis})
}

// unlock releases mu, then hands the events queued under it to Notify.
func (e *Engine) unlock() {
	evs := e.queued
	e.queued = nil
	e.mu.Unlock()
	for _, ev := range evs {
		e.notify(ev)
	}
}

var phaseLine = map[Phase]string{
	Shared:    "shared leases in Redis",
	Holding:   "Redis unreachable: running only on the lease slots this replica holds",
	Settling:  "Redis unreachable: each scope runs on min(share, what this replica held)",
	Alone:     "Redis unreachable: each scope runs on this replica's share, less what the others held beyond theirs",
	Rejoining: "Redis answers again: calls registered, waiting for the replicas seen before the outage",
}

// lostLocked records that Redis did not answer: from Shared or Rejoining, the outage rule
// takes over, from what this replica holds now.
func (e *Engine) lostLocked(cause error) {
	if e.out != nil && e.rejoined.IsZero() {
		e.status.LastError = cause.Error()
		return // already away
	}
	e.newOutageLocked()
	e.setPhaseLocked(e.out.phase(e.now()), cause)
}

// newOutageLocked starts the outage rule now. Its held entries are those of the running
// calls whose entries are certainly in Redis (acquired or renewed, never released): a
// release that failed may have run, so ended calls are not counted on.
func (e *Engine) newOutageLocked() {
	now := e.now()
	held := map[string][]time.Time{}
	for _, l := range e.leases {
		if l.valid.After(now) {
			for _, s := range l.scopes {
				held[s] = append(held[s], l.valid)
			}
		}
	}
	e.out = &outage{since: now, ttl: e.t.ttl, maxRun: e.o.MaxRun, alive: max(1, len(e.known)),
		known: e.known, held: held, strict: e.o.Strict, others: e.view, self: e.o.Replica,
		servesFrom: e.execBound.Add(e.t.silent + e.t.margin)}
	e.rejoined = time.Time{}
	e.local = map[string]*localBucket{}
	e.status.Outages++
	e.excessLocked(now)
}

// excessLocked counts and logs what this replica's running calls may take beyond a
// scope's limit now that every replica may be on the outage rule: its calls beyond its
// share started so lately that a peer's last view may not show them (the view's refresh
// interval and one round trip before now). The limits are those its calls claimed.
func (e *Engine) excessLocked(now time.Time) {
	since := now.Add(-(e.t.heartbeat + e.t.tick + 2*e.t.op))
	total, by := e.beyondSharesLocked(since, e.out.share)
	if total == 0 {
		return
	}
	e.status.OutageExcess += uint64(total)
	e.log.Warn().Dict("scopes", by).Int("calls", total).Msg("cluster: Redis lost with calls beyond this replica's " +
		"shares that the other replicas may not have seen: a scope may run over its limit by these until they end")
}

// beyondSharesLocked counts, per scope, this replica's running calls beyond share(limit)
// that started at or after since (possibleExcess), the limits being those its calls claimed.
func (e *Engine) beyondSharesLocked(since time.Time, share func(limit int) int) (total int, by *zerolog.Event) {
	starts, limits := map[string][]time.Time{}, map[string]int{}
	for _, l := range e.leases {
		for i, s := range l.scopes {
			starts[s] = append(starts[s], l.started)
			limits[s] = l.limits[i]
		}
	}
	by = zerolog.Dict()
	for s, st := range starts {
		if n := possibleExcess(e.running[s], share(limits[s]), st, since); n > 0 {
			total += n
			by = by.Int(s, n)
		}
	}
	return total, by
}
