package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tollgate/tollgate/actors/policy"
	"github.com/tollgate/tollgate/actors/policy/health"
	"github.com/tollgate/tollgate/actors/policy/keys"
	"github.com/tollgate/tollgate/providers/llm"
)

// providerActor owns one provider's admission: its queue with deadlines, its lanes and
// model lanes and its limiters (a policy.Provider), the timer for its next deadline or
// token, one lane actor per model, and the provider's health: its keys, circuit breaker,
// retry budget and learned lanes (a health.State, carried out by vitals: health.go). It
// receives in one of three modes (Receive), and leaves its replicas, batches and reloads to
// parts of their own (see the fields). It tells the supervisor what it could start
// (offers) and starts what it is granted, handing each call to its model's lane; every
// failed attempt and every ending comes back to it (retryAsk, freed), so its health sees
// every call.
//
// Facts and derived state are kept apart so that a crash loses nothing that matters. The
// facts are its records of the calls it holds that have not started (waiting: each call's
// place, deadline and whether its verdict kept it) and of those it started (runs), its lane
// actors, its protocol epoch and generation, and its health. Everything else is derived: after a crash, rebuild makes a new
// policy.Provider from the calls still waiting and from the calls its lane actors report
// running, with the same key rings and the lanes and start cap its health decided, starts a
// new epoch (which voids the grants in flight), and offers afresh.
type providerActor struct {
	g    *Gateway
	p    int
	name string
	slot *slot

	// pv and models are the provider's settings and models in force (facts: a reload
	// changes them, reconfigure.go); gone marks the models a reload removed, which admit
	// nothing new and whose lanes stop once idle. retiring: a reload removed the provider.
	pv       Provider
	models   []Model
	gone     []bool
	retiring bool

	pol *policy.Provider

	// The parts of the provider's work with a type of their own, each over this actor:
	// vitals carries out what its health decides (health.go); peers shares with the other
	// replicas and takes what they decided (shared.go); batches reserves and settles batches
	// (batch.go); reloads applies reloads and models added at run time and retires the
	// provider (reconfigure.go).
	vitals  providerHealth
	peers   replicaLink
	batches batchPart
	reloads providerReload

	// Facts, kept across a rebuild.
	waiting     map[policy.ID]wait
	runs        map[policy.ID]run
	reserved    map[*batchCall]*reservation // batch members started in the policy, not yet settled
	lanes       []*actor.PID
	epoch, sync uint64
	health      *health.State

	// Derived: the models the replicas' shared state had no room for, and the scope each
	// waits on (shared.go); a rebuild forgets them with the policy's blocks.
	blocks map[int]block

	// pubs is, per scope of learned lanes, its publishing to the shared state (sharedlanes.go).
	pubs map[string]*lanesPub

	// mode is the behaviour that receives: normal, rebuilding or out of service. A rebuild
	// waits for every lane's report before it offers; so does a provider taken out of
	// service in the middle of one (reportsDue).
	mode       actor.Behavior
	rebuilding bool
	reportsDue bool
	reported   []bool
	// unreported are the started calls no lane has reported yet in the rebuild (true): a
	// record still here once every lane has is of a call that runs nowhere (its start was
	// handed back and the message that said so lost in the crash), and is forgotten. False
	// marks one whose stream's freed came before its lane's report: a report that still
	// lists it is older than its end, and does not resume it.
	unreported map[policy.ID]bool

	// pacer decides when the provider offers and when timer wakes it (policy.Pacer).
	pacer policy.Pacer
	timer *time.Timer
	inbox interface{ UserMessageCount() int } // the actor's mailbox

	draining bool
	failed   bool

	// Reload state (reconfigure.go): keysSince is when a reload last changed the keys (a call
	// started before then has no key of now); goneLanes counts removed models whose lane
	// still runs; closing is set once the retired provider was found idle.
	keysSince time.Time
	goneLanes int
	closing   bool

	self *actor.PID
	buf  []policy.ID
}

func newProviderActor(g *Gateway, s *slot, pv Provider, models []Model) *providerActor {
	a := &providerActor{g: g, p: s.p, name: pv.Name, slot: s, pv: pv, models: models, gone: make([]bool, len(models)),
		waiting: map[policy.ID]wait{}, runs: map[policy.ID]run{}, reserved: map[*batchCall]*reservation{}, blocks: map[int]block{},
		mode: actor.NewBehavior()}
	a.mode.Become(a.receiveNormal)
	a.vitals, a.peers, a.batches, a.reloads = providerHealth{a}, replicaLink{a}, batchPart{a}, providerReload{a}
	return a
}

// spec is the provider's admission configuration with the models served now and the key
// rings its health keeps (policySpec).
func (a *providerActor) spec() policy.ProviderSpec {
	h := a.health
	rings := make([]*keys.Ring, h.Pools())
	for pl := range rings {
		rings[pl] = h.Ring(pl)
	}
	pool := map[int]int{}
	for _, m := range h.OwnKeys() {
		pool[m] = h.Pool(m)
	}
	return policySpec(&a.pv, a.models, rings, pool, a.g.running, a.g.shares)
}

// Receive hands the message to the provider's mode: normal (receiveNormal), rebuilding after
// a crash (rebuildMode) or out of service (outOfService), each a behaviour the actor becomes.
// A provider its strategy marked down before failNow came leaves service first; Started
// builds the policy and the lanes even then, for the out-of-service mode needs them.
func (a *providerActor) Receive(ctx actor.Context) {
	if _, starting := ctx.Message().(*actor.Started); !starting && !a.failed && a.slot.down.Load() {
		a.fail(ctx)
	}
	a.mode.Receive(ctx)
}

// receiveNormal is the provider in service: it admits, starts, retries and accounts.
func (a *providerActor) receiveNormal(ctx actor.Context) {
	defer a.recoverRebuild(ctx)
	msg := ctx.Message()
	a.g.faults.hit(faultProvider, a.name, "", msg)
	switch m := msg.(type) {
	case *arrive:
		a.arrive(ctx, m.c)
	case *grants:
		a.grants(ctx, m)
	case *freed:
		a.freed(ctx, m.c, m.end)
	case *withdraw:
		a.withdraw(ctx, m.c)
	case *retryAsk:
		a.answerRetry(ctx, m)
	case *wake:
		if a.pacer.Woke(m.timer) {
			a.wake(ctx)
		}
	case *recall:
		if a.pol.Recall(m.r) {
			a.offer(ctx, a.g.now())
		}
	case offerDue:
		a.pacer.Due()
		a.sendOffer(ctx, a.g.now())
	case *unleased:
		a.peers.unleased(ctx, m)
	case *leaseFreed:
		a.peers.leaseFreed(ctx, m.scopes)
	case *clientRoom:
		a.offer(ctx, a.g.now())
	case *resync:
		a.resync(ctx, m.sync)
	case *reserve:
		a.reserveOnce(ctx, m)
	case *retire:
		a.reloads.retire(ctx, m)
	case *drainAll:
		a.drain(ctx)
	case *laneReport:
		// Only a rebuild asks for reports; a late one from an earlier rebuild says nothing new.
	case *actor.Started:
		a.start(ctx)
	case *actor.Stopping:
		a.carry(ctx, a.pacer.Reset())
	default:
		a.receiveAlways(ctx, msg, true)
	}
}

// receiveAlways handles the messages the provider in service and the rebuilding one treat
// alike: what other replicas decided of its health, and questions, reloads and batches'
// settlements. live is the provider in service, which offers after a change of health (a
// rebuilding one offers when it ends); the provider out of service sends it only a state
// query and a retireCheck.
func (a *providerActor) receiveAlways(ctx actor.Context, msg any, live bool) {
	now := a.g.now()
	switch m := msg.(type) {
	case *keyCooled:
		if a.peers.keyCooled(m, now) && live {
			a.vitals.keysChanged(m.pool, now)
			a.offer(ctx, now)
		}
	case *breakerShared:
		a.peers.breakerShared(m.d, now)
		a.offerIf(ctx, live, now)
	case *lanesShared:
		a.peers.lanesShared(m, now)
		a.offerIf(ctx, live, now)
	case *lanesPublished:
		a.peers.lanesPublished(m, now)
		a.offerIf(ctx, live, now)
	case *readShared:
		a.peers.readShared()
	case *stateQuery:
		m.reply <- statePart{p: a.p, provider: a.state()}
	case *revokeClient:
		a.revoke(ctx, m)
	case *addModel:
		a.reloads.addModel(ctx, m)
	case *settle:
		a.batches.settleBatch(ctx, m)
	case *reconfigureProvider:
		a.reloads.reconfigure(ctx, m)
	case *retireCheck:
		a.reloads.retireCheck(ctx, m)
	case *failNow:
		a.fail(ctx)
	}
}

// offerIf offers when the provider is in service (see receiveAlways).
func (a *providerActor) offerIf(ctx actor.Context, live bool, now time.Time) {
	if live {
		a.offer(ctx, now)
	}
}

// start builds the provider's health, its policy and its lanes.
func (a *providerActor) start(ctx actor.Context) {
	a.self = ctx.Self()
	a.health = health.New(healthSpec(a.pv, a.models), a.g.now())
	a.pol = policy.NewProvider(a.spec())
	if a.sync != 0 { // added by a reload after the supervisor was rebuilt
		a.pol.Resync(a.sync)
		a.epoch = a.pol.Epoch()
	}
	a.vitals.applyHealth(a.g.now())
	for m := range a.models {
		a.spawnLane(ctx, m)
	}
	if a.g.started.Load() { // added by a reload; those of the start read at New's end
		a.peers.readShared() // what the other replicas decided before this provider started
	}
}

// answerRetry answers a stream's question whether its failed attempt is tried again.
func (a *providerActor) answerRetry(ctx actor.Context, m *retryAsk) {
	r, ok := a.runs[m.c.id]
	if !ok || a.reloads.staleKeys(r.started) {
		// Its backend and keys are those of before a reload: it ends as it is. (A call
		// with no record is not running here: it never asks.)
		m.answer(retryAnswer{})
		return
	}
	now := a.g.now()
	m.answer(a.vitals.retryAsk(m, &r, now))
	a.runs[m.c.id] = r
	a.update(ctx, now)
}

// reserveOnce reserves lanes for a batch's members, or says again what it reserved when
// the supervisor, rebuilt after a crash, asks anew.
func (a *providerActor) reserveOnce(ctx actor.Context, m *reserve) {
	if _, done := a.reserved[m.b]; done {
		send(ctx, a.g.supervisor, &reserved{b: m.b, p: a.p, ok: true, o: a.pol.Offer(a.g.now())})
		return
	}
	a.batches.reserve(ctx, m)
}

// arrive admits a call: a new one at the tail of its FIFO, one that comes back at the place
// its first arrival gives it. A capacity requeue (requeueOf) frees the refused call's lanes
// in the same step, so the call is back at the head of its queue before anything else can
// take them.
func (a *providerActor) arrive(ctx actor.Context, c *call) {
	now := a.g.now()
	if old := c.requeueOf; old != nil {
		a.finish(old.c, &old.end, now)
	}
	w := wait{c: c, entered: now, deadline: c.deadline}
	if w.deadline.IsZero() {
		w.deadline = now.Add(a.pv.QueueTimeout - c.keyWait) // the wait for its key's tokens counts
	}
	switch err := a.vitals.refusal(c, w.deadline, now); {
	case c.requeueOf == nil && (a.retiring || a.gone[c.route.m]):
		c.answer(admitResult{err: a.g.table.Load().notFound(c.route.id)}) // a reload removed it
	case a.draining:
		c.answer(admitResult{err: &llm.Error{Kind: llm.KindDraining, Message: "the gateway is shutting down"}})
	case err != nil:
		c.answer(admitResult{err: err})
	default:
		a.enter(ctx, w, now)
	}
	a.update(ctx, now)
}

// enter starts a call at once on the provider's credit when it can, else queues it in the
// policy; one the policy refuses is answered at once.
func (a *providerActor) enter(ctx actor.Context, w wait, now time.Time) {
	c := w.c
	if a.creditable() {
		if st, ok := a.pol.StartOnCredit(c.id, a.arrival(&w), now); ok {
			a.run(ctx, w, st.Key, now)
			return
		}
	}
	a.waiting[c.id] = w
	if o, k := a.pol.Enter(c.id, a.arrival(&w), now); o == policy.Rejected {
		delete(a.waiting, c.id)
		c.answer(admitResult{err: &llm.Error{Kind: k, Provider: a.name, Message: "internal fault: the call could not be queued (" + k.String() + ")"}})
	}
}

// arrival is the call as the policy queues it, from its wait record.
func (a *providerActor) arrival(w *wait) policy.Arrival {
	c := w.c
	return policy.Arrival{Model: c.route.m, Class: c.prio, Tokens: c.tokens, Client: c.client, Arrived: w.placed(),
		Deadline: w.deadline, Confirmed: w.confirmed || c.requeueOf != nil, Bound: c.bound}
}

// finish frees a started call's lanes once: its tokens are corrected from what the backend
// reported, and its ending (nil: it never ran) is applied to the provider's health, once,
// when the provider holds the call's run record or its policy holds the call (a rebuilt
// policy may not yet: its lane has not reported it). It reports whether the policy held the
// call running.
func (a *providerActor) finish(c *call, end *ending, now time.Time) bool {
	if end == nil {
		end = &notRun
	}
	used := end.usage.PromptTokens + end.usage.CompletionTokens
	if used > 0 {
		a.pol.Correct(c.id, used, now)
	}
	a.peers.correctShared(end.charged, used)
	a.g.rates.correct(c.client, c.keyTokens, used)
	r, ok := a.runs[c.id]
	delete(a.runs, c.id)
	running := a.pol.Finish(c.id, now)
	if !running && !ok {
		return false
	}
	if !ok {
		r = run{c: c}
	}
	a.vitals.settle(&r, end, now)
	return running
}

// notRun is the ending of a call that never ran (read only).
var notRun ending

// grants starts what the supervisor granted, applies its verdicts and its acknowledgement.
// The supervisor predicts that each grant starts a waiting request it did not count as kept,
// for the client it named; only when one does not (it is given back, or the policy says to
// offer again: see policy.Provider.Grant), a verdict removes a request or was moot, or the
// acknowledgement leaves requests awaiting a verdict, does it need a new offer.
func (a *providerActor) grants(ctx actor.Context, m *grants) {
	now := a.g.now()
	changed := false
	for _, gr := range m.g {
		st, again, ok := a.pol.Grant(gr, now)
		id := st.ID
		if !ok {
			changed = true
			continue
		}
		changed = changed || again
		w, ok := a.waiting[id]
		delete(a.waiting, id)
		if !ok || w.c.answered.Load() {
			// Answered while it waited (a supervision strategy answered it after a crash):
			// nobody runs it, so its lanes are free again.
			a.pol.Finish(id, now)
			changed = true
			continue
		}
		a.run(ctx, w, st.Key, now)
	}
	for _, v := range m.v {
		w, ok := a.waiting[v.ID]
		kind, gone := a.pol.Verdict(v)
		switch {
		case gone:
			delete(a.waiting, v.ID)
			if ok {
				w.c.answer(admitResult{err: a.busy(kind, w.c, now), queueWait: w.queueWait(now)})
			}
			changed = true
		case !ok:
			// Moot: the request started or left meanwhile, but the supervisor counted it as
			// kept or removed; it must hear what became of it.
			changed = true
		case v.Epoch == a.epoch:
			if kept := !v.Overloaded && !v.QueueFull; kept != w.confirmed { // kept, now or by an earlier verdict
				w.confirmed = kept
				a.waiting[v.ID] = w
			}
		}
	}
	if m.ack != nil && a.pol.Ack(*m.ack) > 0 {
		changed = true // the requests it matured await their verdicts: list them
	}
	switch {
	case changed:
		a.offer(ctx, now)
		return
	case m.credit != nil && a.creditable():
		a.pol.TakeCredit(*m.credit)
	}
	a.arm(ctx, now)
}

// run hands a call the policy started on key to its model's lane, with what the lane and
// its stream need of the start; the provider keeps its own record of it (runs).
func (a *providerActor) run(ctx actor.Context, w wait, key int, now time.Time) {
	c := w.c
	r := run{c: c, probe: w.probe}
	a.vitals.started(&r, key, now)
	a.runs[c.id] = r
	m := &startCall{c: c}
	m.run.set(&a.pv, &r, w.entered, w.deadline)
	if a.g.opts.Shared != nil {
		m.run.shared = &startShared{lanes: [2]int{a.pol.Lanes().Effective(), a.pol.Lanes().EffectiveModel(c.route.m)}, keyName: r.keyName}
	}
	send(ctx, a.lanes[c.route.m], m)
}

// creditable reports whether the provider may hold and use standing credit: not while it
// drains or retires (those offer after every change to report idle), nor with replicas.
func (a *providerActor) creditable() bool {
	return !a.draining && !a.retiring && a.goneLanes == 0 && a.g.opts.Shared == nil
}

// update offers after a change, unless the dispatcher needs no offer: the provider holds
// credit that bounds what it runs, and nothing waits (policy.Provider.Quiet).
func (a *providerActor) update(ctx actor.Context, now time.Time) {
	if a.pol.Quiet() && a.creditable() {
		a.carry(ctx, a.pacer.Idle()) // nothing waits: nothing to wake for
		return
	}
	a.offer(ctx, now)
}

func (a *providerActor) freed(ctx actor.Context, c *call, end *ending) {
	now := a.g.now()
	if a.finish(c, end, now) {
		a.update(ctx, now)
	}
}

func (a *providerActor) withdraw(ctx actor.Context, c *call) {
	now := a.g.now()
	if a.pol.Cancel(c.id) {
		w := a.waiting[c.id]
		delete(a.waiting, c.id)
		c.answer(admitResult{err: c.ctx.Err(), queueWait: w.queueWait(now)})
		a.offer(ctx, now)
	}
}

// wake is the timer: expire what is due, then offer (a token may have come as well).
func (a *providerActor) wake(ctx actor.Context) {
	now := a.g.now()
	a.buf = a.pol.Expire(now, a.buf[:0])
	for _, id := range a.buf {
		if w, ok := a.waiting[id]; ok {
			delete(a.waiting, id)
			w.c.answer(admitResult{err: a.busy(llm.KindQueueTimeout, w.c, now), queueWait: w.queueWait(now)})
		}
	}
	a.offer(ctx, now)
}

// resync answers a rebuilt supervisor: a new epoch (the old supervisor's grants still in
// flight are void) and a fresh offer for its generation.
func (a *providerActor) resync(ctx actor.Context, sync uint64) {
	a.pol.Resync(sync)
	a.epoch, a.sync = a.pol.Epoch(), sync
	a.offer(ctx, a.g.now()) // the calls still awaiting a verdict are listed in it again
}

// offer reports the provider's state to the supervisor and re-arms the timer: at once with
// its mailbox empty, else once the messages waiting there are handled (policy.Pacer), so
// that a burst of arrivals, grants or endings makes one offer, not one each.
func (a *providerActor) offer(ctx actor.Context, now time.Time) {
	busy := a.inbox != nil && a.inbox.UserMessageCount() > 0
	if a.carry(ctx, a.pacer.Offer(a.pol.Queued(), busy)) {
		a.sendOffer(ctx, now)
	}
}

// sendOffer sends the provider's offer now.
func (a *providerActor) sendOffer(ctx actor.Context, now time.Time) {
	send(ctx, a.g.supervisor, &offer{p: a.p, o: a.pol.Offer(now)})
	a.arm(ctx, now)
	if a.draining && a.pol.Lanes().Running() == 0 && a.pol.Queued() == 0 {
		send(ctx, a.g.supervisor, &providerIdle{p: a.p})
	}
	if a.goneLanes > 0 || a.retiring {
		a.reloads.retireIdle(ctx)
	}
}

// arm sets the timer for the provider's next wake-up (see policy.Pacer.Wake).
func (a *providerActor) arm(ctx actor.Context, now time.Time) {
	at, ok := a.pol.NextWake(now)
	a.carry(ctx, a.pacer.Wake(now, at, ok))
}

// carry carries out what the pacer decided of the timer and of an offer queued, and reports
// whether the offer is to be sent now (policy.Pace).
func (a *providerActor) carry(ctx actor.Context, pc policy.Pace) bool {
	if pc.Stop && a.timer != nil {
		a.timer.Stop()
		a.timer = nil
	}
	if pc.Arm {
		self, root, n := a.self, a.g.system.Root, pc.Timer
		// The timer's goroutine only sends one message and exits.
		a.timer = time.AfterFunc(pc.In, func() { send(root, self, &wake{timer: n}) })
	}
	if pc.Queue {
		send(ctx, ctx.Self(), offerDue{})
	}
	return pc.Offer
}

// answerWaiting answers a waiting call with err and forgets it.
func (a *providerActor) answerWaiting(id policy.ID, err error, now time.Time) {
	w, ok := a.waiting[id]
	if !ok {
		return
	}
	a.pol.Cancel(id)
	delete(a.waiting, id)
	w.c.answer(admitResult{err: err, queueWait: w.queueWait(now)})
}

// drain answers every waiting call gateway_draining and has the lanes stop what runs; the
// provider reports idle once nothing of it runs.
func (a *providerActor) drain(ctx actor.Context) {
	a.draining = true
	now := a.g.now()
	for id := range a.waiting {
		a.answerWaiting(id, &llm.Error{Kind: llm.KindDraining, Message: "the gateway is shutting down"}, now)
	}
	for _, l := range a.lanes {
		if l != nil {
			send(ctx, l, &cancelAll{cause: errDraining})
		}
	}
	a.offer(ctx, now)
}
