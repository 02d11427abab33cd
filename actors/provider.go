package actors

import (
	"cmp"
	"errors"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tollgate/tollgate/actors/policy"
	"github.com/tollgate/tollgate/providers/llm"
)

// providerActor owns one provider's admission: its queue with deadlines, its lanes and
// model lanes and its limiters (a policy.Provider), the timer for its next deadline or
// token, one lane actor per model, and the provider's health: its keys, circuit breaker,
// retry budget and learned lanes (health.go). It tells the supervisor what it could start
// (offers) and starts what it is granted, handing each call to its model's lane; every
// failed attempt and every ending comes back to it (retryAsk, freed), so its health sees
// every call.
//
// Facts and derived state are kept apart so that a crash loses nothing that matters. The
// facts are the calls it holds that have not started (waiting: each call carries its place,
// deadline and whether its verdict kept it), its lane actors, its protocol epoch and
// generation, and its health. Everything else is derived: after a crash, rebuild makes a new
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

	// Facts, kept across a rebuild.
	waiting     map[policy.ID]*call
	reserved    map[*batchCall]*reservation // batch members started in the policy, not yet settled
	lanes       []*actor.PID
	epoch, sync uint64
	health      *health

	// Derived: the models the replicas' shared state had no room for, and the scope each
	// waits on (shared.go); a rebuild forgets them with the policy's blocks.
	blocks map[int]block

	// pubs is, per scope of learned lanes, its publishing to the shared state (sharedlanes.go).
	pubs map[string]*lanesPub

	// A rebuild waits for every lane's report before it offers; so does a provider taken
	// out of service in the middle of one (reportsDue).
	rebuilding bool
	reportsDue bool
	reported   []bool

	timer  *time.Timer
	wakeAt time.Time // when timer fires; zero when none is armed

	offerQueued bool                                // an offerDue is in the mailbox: offer sends nothing more
	inbox       interface{ UserMessageCount() int } // the actor's mailbox

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
	return &providerActor{g: g, p: s.p, name: pv.Name, slot: s, pv: pv, models: models, gone: make([]bool, len(models)),
		waiting: map[policy.ID]*call{}, reserved: map[*batchCall]*reservation{}, blocks: map[int]block{}}
}

// spec is the provider's admission configuration with the models served now and the key
// rings its health keeps.
func (a *providerActor) spec() policy.ProviderSpec {
	pv := a.pv
	models := a.models
	ps := policy.ProviderSpec{Name: pv.Name, Lanes: pv.Lanes, QueueLength: pv.QueueLength,
		QueueTimeout: pv.QueueTimeout, RPM: pv.RateLimit.RPM, TPM: pv.RateLimit.TPM, Burst: pv.RateLimit.Burst,
		Models: make([]policy.ModelSpec, len(models)), Clients: a.g.running}
	for _, ring := range a.health.rings {
		ps.Keys = append(ps.Keys, policy.KeyPool{Ring: ring, Limit: pv.KeyRateLimit})
	}
	for i, m := range models {
		ps.Models[i] = policy.ModelSpec{Name: m.Name, Lanes: m.Lanes, Keys: a.health.pool[i]}
	}
	return ps
}

func (a *providerActor) Receive(ctx actor.Context) {
	msg := ctx.Message()
	// Started builds the policy and the lanes even for a provider taken out of service
	// before it ran (a test does that; a slot marked down before the actor's first
	// message): receiveFailed needs them, and without them every later message panicked.
	if _, starting := msg.(*actor.Started); !starting && (a.failed || a.slot.down.Load()) {
		a.receiveFailed(ctx, msg)
		return
	}
	defer a.recoverRebuild(ctx)
	a.g.faults.hit(faultProvider, a.name, "", msg)
	if a.rebuilding {
		a.receiveRebuilding(ctx, msg)
		return
	}
	switch m := msg.(type) {
	case *arrive:
		a.arrive(ctx, m.c)
	case *grants:
		a.grants(ctx, m)
	case *freed:
		a.freed(ctx, m.c)
	case *withdraw:
		a.withdraw(ctx, m.c)
	case *retryAsk:
		now := a.g.now()
		if a.staleKeys(m.c) {
			// Its backend and keys are those of before a reload: it ends as it is.
			m.answer(retryAnswer{})
			break
		}
		m.answer(a.retryAsk(m, now))
		a.update(ctx, now)
	case *wake:
		a.wake(ctx)
	case *recall:
		if a.pol.Recall(m.r) {
			a.offer(ctx, a.g.now())
		}
	case offerDue:
		a.sendOffer(ctx, a.g.now())
	case *unleased:
		a.unleased(ctx, m)
	case *leaseFreed:
		a.leaseFreed(ctx, m.scopes)
	case *clientFreed:
		a.offer(ctx, a.g.now())
	case *keyCooled:
		if now := a.g.now(); a.keyCooled(m, now) {
			a.keysChanged(m.pool, now)
			a.offer(ctx, now)
		}
	case *breakerShared:
		now := a.g.now()
		a.breakerShared(m.d, now)
		a.offer(ctx, now)
	case *lanesShared:
		now := a.g.now()
		a.lanesShared(m, now)
		a.offer(ctx, now)
	case *lanesPublished:
		now := a.g.now()
		a.lanesPublished(m, now)
		a.offer(ctx, now)
	case *readShared:
		a.readShared()
	case *resync:
		a.resync(ctx, m.sync)
	case *stateQuery:
		m.reply <- statePart{p: a.p, provider: a.state()}
	case *revokeClient:
		a.revoke(ctx, m)
	case *addModel:
		a.addModel(ctx, m)
	case *reserve:
		if _, done := a.reserved[m.b]; done { // sent again after a crash
			send(ctx, a.g.supervisor, &reserved{b: m.b, p: a.p, ok: true, o: a.pol.Offer(a.g.now())})
		} else {
			a.reserve(ctx, m)
		}
	case *settle:
		a.settleBatch(ctx, m)
	case *reconfigureProvider:
		a.reconfigure(ctx, m)
	case *retire:
		a.retire(ctx, m)
	case *retireCheck:
		a.retireCheck(ctx, m)
	case *drainAll:
		a.drain(ctx)
	case *failNow:
		a.fail(ctx)
	case *laneReport:
		// Only a rebuild asks for reports; a late one from an earlier rebuild says nothing new.
	case *actor.Started:
		a.self = ctx.Self()
		a.health = newHealth(a.pv, a.models, a.g.now())
		a.pol = policy.NewProvider(a.spec())
		if a.sync != 0 { // added by a reload after the supervisor was rebuilt
			a.pol.Resync(a.sync)
			a.epoch = a.pol.Epoch()
		}
		a.applyHealth(a.g.now())
		for m := range a.models {
			a.spawnLane(ctx, m)
		}
		if a.g.started.Load() { // added by a reload; those of the start read at New's end
			a.readShared() // what the other replicas decided before this provider started
		}
	case *actor.Stopping:
		a.stopTimer()
	}
}

// arrive admits a call: a new one at the tail of its FIFO, one that comes back at the place
// its first arrival gives it. A capacity requeue (requeueOf) frees the refused call's lanes
// in the same step, so the call is back at the head of its queue before anything else can
// take them.
func (a *providerActor) arrive(ctx actor.Context, c *call) {
	now := a.g.now()
	if old := c.requeueOf; old != nil {
		a.finish(old, now)
	}
	c.entered = now
	if c.deadline.IsZero() {
		c.deadline = now.Add(a.pv.QueueTimeout)
	}
	switch err := a.refusal(c, now); {
	case c.requeueOf == nil && (a.retiring || a.gone[c.route.m]):
		c.answer(admitResult{err: a.g.notFound(c.route.id)}) // a reload removed it
	case a.draining:
		c.answer(admitResult{err: &llm.Error{Kind: llm.KindDraining, Message: "the gateway is shutting down"}})
	case err != nil:
		c.answer(admitResult{err: err})
	default:
		a.enter(ctx, c, now)
	}
	a.update(ctx, now)
}

// enter starts a call at once on the provider's credit when it can, else queues it in the
// policy; one the policy refuses is answered at once.
func (a *providerActor) enter(ctx actor.Context, c *call, now time.Time) {
	if a.creditable() {
		if st, ok := a.pol.StartOnCredit(c.id, a.arrival(c), now); ok {
			a.run(ctx, c, st.Key, now)
			return
		}
	}
	a.waiting[c.id] = c
	if o, k := a.pol.Enter(c.id, a.arrival(c), now); o == policy.Rejected {
		delete(a.waiting, c.id)
		c.answer(admitResult{err: &llm.Error{Kind: k, Provider: a.name, Message: "internal fault: the call could not be queued (" + k.String() + ")"}})
	}
}

// arrival is the call as the policy queues it, from its facts.
func (a *providerActor) arrival(c *call) policy.Arrival {
	return policy.Arrival{Model: c.route.m, Class: c.prio, Tokens: c.tokens, Client: c.client, Arrived: c.placed(),
		Deadline: c.deadline, Confirmed: c.confirmed || c.requeueOf != nil}
}

// finish frees a started call's lanes once: its tokens are corrected from what the backend
// reported, and its ending is applied to the provider's health. It reports whether the call
// was running.
func (a *providerActor) finish(c *call, now time.Time) bool {
	if used := c.end.usage.PromptTokens + c.end.usage.CompletionTokens; used > 0 {
		a.pol.Correct(c.id, used, now)
	}
	a.correctShared(c, c.end.usage.PromptTokens+c.end.usage.CompletionTokens)
	if !a.pol.Finish(c.id, now) {
		return false
	}
	a.settle(c, now)
	return true
}

// grants starts what the supervisor granted, applies its verdicts and its acknowledgement.
// The supervisor predicts that each grant starts a waiting request it did not count as kept;
// only when one does not (it is given back, or it started a kept request), a verdict
// removes a request or was moot, or the acknowledgement leaves requests awaiting a verdict,
// does it need a new offer.
func (a *providerActor) grants(ctx actor.Context, m *grants) {
	now := a.g.now()
	changed := false
	for _, gr := range m.g {
		st, kept, ok := a.pol.Grant(gr, now)
		id := st.ID
		if !ok {
			changed = true
			continue
		}
		changed = changed || kept
		c := a.waiting[id]
		delete(a.waiting, id)
		if c == nil || c.answered.Load() {
			// Answered while it waited (a supervision strategy answered it after a crash):
			// nobody runs it, so its lanes are free again.
			a.pol.Finish(id, now)
			changed = true
			continue
		}
		a.run(ctx, c, st.Key, now)
	}
	for _, v := range m.v {
		c := a.waiting[v.ID]
		kind, gone := a.pol.Verdict(v)
		switch {
		case gone:
			delete(a.waiting, v.ID)
			if c != nil {
				c.answer(admitResult{err: a.busy(kind, c, now), queueWait: c.queueWait(now)})
			}
			changed = true
		case c == nil:
			// Moot: the request started or left meanwhile, but the supervisor counted it as
			// kept or removed; it must hear what became of it.
			changed = true
		case v.Epoch == a.epoch:
			c.confirmed = !v.Overloaded && !v.QueueFull // kept, now or by an earlier verdict
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
	a.arm(now)
}

// run hands a call the policy started on key to its model's lane.
func (a *providerActor) run(ctx actor.Context, c *call, key int, now time.Time) {
	a.current(c)
	a.started(c, key, now)
	c.lanes = [2]int{a.pol.EffectiveLanes(), a.pol.EffectiveModelLanes(c.route.m)}
	send(ctx, a.lanes[c.route.m], &startCall{c: c})
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
		a.stopTimer() // nothing waits: nothing to wake for
		return
	}
	a.offer(ctx, now)
}

func (a *providerActor) freed(ctx actor.Context, c *call) {
	now := a.g.now()
	if a.finish(c, now) {
		a.update(ctx, now)
	}
}

func (a *providerActor) withdraw(ctx actor.Context, c *call) {
	now := a.g.now()
	if a.pol.Cancel(c.id) {
		delete(a.waiting, c.id)
		c.answer(admitResult{err: c.ctx.Err(), queueWait: c.queueWait(now)})
		a.offer(ctx, now)
	}
}

// wake is the timer: expire what is due, then offer (a token may have come as well).
func (a *providerActor) wake(ctx actor.Context) {
	a.wakeAt = time.Time{}
	now := a.g.now()
	a.buf = a.pol.Expire(now, a.buf[:0])
	for _, id := range a.buf {
		if c := a.waiting[id]; c != nil {
			delete(a.waiting, id)
			c.answer(admitResult{err: a.busy(llm.KindQueueTimeout, c, now), queueWait: c.queueWait(now)})
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

// offer reports the provider's state to the supervisor and re-arms the timer.
//
// With messages waiting in the mailbox, the offer goes out once they are handled (offerDue,
// sent to itself, comes after them): a burst of arrivals, grants or endings makes one
// offer, not one each. Each offer lists the calls still awaiting a verdict and the policy
// works through them for it, so offering per message cost O(queue) per message, and under a
// burst of arrivals a short queue grew long and the gateway collapsed (docs/benchmarks.md,
// "The collapse at 3,000 RPS").
// Offers supersede each other, so sending fewer is sending the last of them. With nothing
// waiting, the offer goes at once, without the extra message.
func (a *providerActor) offer(ctx actor.Context, now time.Time) {
	if a.pol.Queued() == 0 {
		a.stopTimer() // nothing waits for a deadline or a token: a wake-up would find nothing
	}
	switch {
	case a.offerQueued:
	case a.inbox == nil || a.inbox.UserMessageCount() == 0:
		a.sendOffer(ctx, now)
	default:
		a.offerQueued = true
		send(ctx, ctx.Self(), offerDue{})
	}
}

// sendOffer sends the provider's offer now.
func (a *providerActor) sendOffer(ctx actor.Context, now time.Time) {
	a.offerQueued = false
	send(ctx, a.g.supervisor, &offer{p: a.p, o: a.pol.Offer(now)})
	a.arm(now)
	if a.draining && a.pol.Running() == 0 && a.pol.Queued() == 0 {
		send(ctx, a.g.supervisor, &providerIdle{p: a.p})
	}
	if a.goneLanes > 0 || a.retiring {
		a.retireIdle(ctx)
	}
}

// arm sets the timer for the provider's next wake-up, unless one is armed no later; with
// nothing to wake for, it stops the timer.
func (a *providerActor) arm(now time.Time) {
	at, ok := a.pol.NextWake(now)
	if !ok {
		a.stopTimer()
		return
	}
	if !a.wakeAt.IsZero() && !at.Before(a.wakeAt) {
		return
	}
	a.stopTimer()
	a.wakeAt = at
	self, root := a.self, a.g.system.Root
	// The timer's goroutine only sends one message and exits.
	a.timer = time.AfterFunc(max(at.Sub(now), 0), func() { send(root, self, &wake{}) })
}

func (a *providerActor) stopTimer() {
	if a.timer != nil {
		a.timer.Stop()
		a.timer = nil
	}
	a.wakeAt = time.Time{}
}

// answerWaiting answers a waiting call with err and forgets it.
func (a *providerActor) answerWaiting(id policy.ID, err error, now time.Time) {
	c := a.waiting[id]
	if c == nil {
		return
	}
	a.pol.Cancel(id)
	delete(a.waiting, id)
	c.answer(admitResult{err: err, queueWait: c.queueWait(now)})
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

// rebuild replaces the derived state after a crash: a new policy.Provider, to be filled
// from the facts once every lane has reported what runs on it (finishRebuild).
func (a *providerActor) rebuild(ctx actor.Context) {
	a.stopTimer()
	a.offerQueued = false // an offerDue lost in the crash must not hold every later offer back
	a.pol = policy.NewProvider(a.spec())
	clear(a.blocks)
	for _, r := range a.reserved { // batch members: running in the policy, on no lane yet
		for _, c := range r.calls {
			a.pol.Resume(c.member(c.route.m), c.started, c.key)
		}
	}
	a.rebuilding = true
	a.reported = make([]bool, len(a.lanes))
	for m, l := range a.lanes {
		if l == nil { // a removed model's lane, stopped once idle
			a.reported[m] = true
			continue
		}
		send(ctx, l, &reportRunning{})
	}
	if !slices.Contains(a.reported, false) {
		a.finishRebuild(ctx)
	}
}

// receiveRebuilding handles messages while the lanes' reports are awaited. Arrivals and
// withdrawals change the facts; freed lanes are applied as they come (a lane reports before
// or after it frees a call, in its own order, so the two never disagree); grants and
// verdicts are for the old epoch and void.
func (a *providerActor) receiveRebuilding(ctx actor.Context, msg any) {
	now := a.g.now()
	switch m := msg.(type) {
	case *laneReport:
		if m.m < len(a.reported) && !a.reported[m.m] {
			a.reported[m.m] = true
			for _, c := range m.calls {
				a.pol.Resume(c.member(m.m), c.started, c.key)
			}
		}
		if !slices.Contains(a.reported, false) {
			a.finishRebuild(ctx)
		}
	case *arrive:
		if old := m.c.requeueOf; old != nil {
			a.pol.Finish(old.id, now)
		}
		m.c.entered = now
		if m.c.deadline.IsZero() {
			m.c.deadline = now.Add(a.pv.QueueTimeout)
		}
		a.waiting[m.c.id] = m.c
	case *retryAsk:
		m.answer(retryAnswer{}) // the rebuild does not know the call's state: no retry; its ending records it
	case *withdraw:
		if c := a.waiting[m.c.id]; c != nil {
			delete(a.waiting, m.c.id)
			c.answer(admitResult{err: c.ctx.Err(), queueWait: c.queueWait(now)})
		}
	case *freed:
		a.finish(m.c, now)
	case *keyCooled:
		a.keyCooled(m, now) // the keys are health, kept across the rebuild
	case *breakerShared:
		a.breakerShared(m.d, now) // so are the breaker and the learned lanes
	case *lanesShared:
		a.lanesShared(m, now)
	case *lanesPublished:
		a.lanesPublished(m, now)
	case *readShared:
		a.readShared()
	case *unleased:
		// Back to waiting: the rebuild requeues it in arrival order (if a lane reported it
		// running before it was handed back, that is undone first).
		a.pol.Finish(m.c.id, now)
		m.c.started, m.c.confirmed = time.Time{}, true
		a.waiting[m.c.id] = m.c
	case *resync:
		a.sync = m.sync // answered when the rebuild ends
	case *recall:
		// The rebuilt policy holds no credit; the rebuild's end offers.
	case offerDue:
		a.offerQueued = false // the rebuild's end offers
	case *stateQuery:
		m.reply <- statePart{p: a.p, provider: a.state()}
	case *revokeClient:
		a.revoke(ctx, m)
	case *drainAll:
		a.draining = true
	case *failNow:
		a.fail(ctx)
	case *addModel:
		a.addModel(ctx, m)
	case *reserve:
		why := &llm.Error{Kind: llm.KindBatchCapacity, Provider: a.name, RetryAfter: time.Second,
			Message: "provider " + a.name + " is rebuilding its state after a fault; try again shortly"}
		send(ctx, a.g.supervisor, &reserved{b: m.b, p: a.p, why: why, o: a.pol.Offer(now)})
	case *settle:
		a.settleBatch(ctx, m)
	case *reconfigureProvider:
		a.reconfigure(ctx, m)
	case *retire:
		a.retiring = true
		m.ack(a.p, nil) // the rebuild's offer looks whether it is idle already
	case *retireCheck:
		// Sent only once the retired provider was idle (closing), which nothing rebuilt
		// changes: dropped here, nothing would stop the provider.
		a.retireCheck(ctx, m)
	}
}

// finishRebuild requeues the waiting calls in arrival order, starts a new epoch, and offers.
func (a *providerActor) finishRebuild(ctx actor.Context) {
	now := a.g.now()
	calls := make([]*call, 0, len(a.waiting))
	for _, c := range a.waiting {
		calls = append(calls, c)
	}
	slices.SortFunc(calls, func(x, y *call) int {
		return cmp.Or(x.entered.Compare(y.entered), cmp.Compare(x.id, y.id))
	})
	for _, c := range calls {
		if c.answered.Load() {
			delete(a.waiting, c.id)
			continue
		}
		ar := a.arrival(c)
		ar.Reported = true // offered before the crash: it awaits only its verdict
		if o, _ := a.pol.Enter(c.id, ar, now); o == policy.Rejected {
			delete(a.waiting, c.id)
		}
	}
	a.epoch++
	a.pol.Rebuilt(now, a.epoch, a.sync)
	a.applyHealth(now)
	a.rebuilding = false
	a.g.log.Warn().Str("provider", a.name).Int("running", a.pol.Running()).Int("queued", a.pol.Queued()).
		Msg("provider actor rebuilt its state after a crash")
	if a.draining {
		a.drain(ctx)
		return
	}
	a.offer(ctx, now)
}

// errProviderFailed is the cause of every call a provider taken out of service stops.
var errProviderFailed = errors.New("provider taken out of service")

// fail takes the provider out of service for good: its actors failed past their restart
// budget, so a fault repeats. Every waiting call is answered provider_unavailable, every
// running one is stopped; from then on the provider only keeps its lanes' accounting
// (receiveFailed) and offers nothing, so the rest of the gateway keeps serving.
func (a *providerActor) fail(ctx actor.Context) {
	if a.failed {
		return
	}
	a.failed = true
	a.slot.down.Store(true)
	a.stopTimer()
	a.g.log.Error().Str("provider", a.name).Msg("provider taken out of service: its actors failed past their restart budget")
	now := a.g.now()
	if a.rebuilding {
		// The lanes' reports still on their way are applied as they come (receiveFailed).
		// Until all are in, the policy does not know every running call: it offers
		// nothing, so the supervisor keeps counting the calls of the last offer and never
		// grants past max_running while they still run.
		a.rebuilding, a.reportsDue = false, true
		a.epoch++
		a.pol.Rebuilt(now, a.epoch, a.sync)
	}
	for id, c := range a.waiting {
		a.pol.Cancel(id)
		delete(a.waiting, id)
		c.answer(admitResult{err: providerDown(a.name), queueWait: c.queueWait(now)})
	}
	a.pol.SetEffectiveLanes(0)
	for _, l := range a.lanes {
		if l != nil {
			send(ctx, l, &cancelAll{cause: errProviderFailed})
		}
	}
	a.failedOffer(ctx, now)
}

// failedOffer sends the out-of-service provider's offer, once every lane's report of a
// rebuild cut short is in (see fail).
func (a *providerActor) failedOffer(ctx actor.Context, now time.Time) {
	if !a.reportsDue {
		send(ctx, a.g.supervisor, &offer{p: a.p, o: a.pol.Offer(now)})
	}
}

// receiveFailed is the provider out of service: no fault hook, no admission; it answers,
// accounts and reports, so that its calls' lanes and the global cap stay right.
func (a *providerActor) receiveFailed(ctx actor.Context, msg any) {
	if !a.failed {
		a.fail(ctx)
	}
	now := a.g.now()
	switch m := msg.(type) {
	case *arrive:
		if old := m.c.requeueOf; old != nil {
			a.pol.Finish(old.id, now)
		}
		m.c.answer(admitResult{err: providerDown(a.name)})
	case *retryAsk:
		m.answer(retryAnswer{})
	case *grants:
		for _, gr := range m.g {
			a.pol.Grant(gr, now) // counted as seen: the offer gives the start back
		}
		if m.ack != nil {
			a.pol.Ack(*m.ack)
		}
		a.failedOffer(ctx, now)
	case *freed:
		a.finishFailed(ctx, m.c, now)
	case *unleased: // the replicas had no room for it; it will not wait now
		m.c.answer(admitResult{err: providerDown(a.name)})
		a.finishFailed(ctx, m.c, now)
	case *resync:
		a.pol.Resync(m.sync)
		a.epoch, a.sync = a.pol.Epoch(), m.sync
		a.failedOffer(ctx, now)
	case offerDue: // queued before the provider failed; failedOffer offers at once now
		a.offerQueued = false
	case *recall:
		if a.pol.Recall(m.r) {
			a.failedOffer(ctx, now)
		}
	case *stateQuery:
		m.reply <- statePart{p: a.p, provider: a.state()}
	case *revokeClient:
		a.revoke(ctx, m)
	case *addModel:
		m.reply <- errors.New("provider " + a.name + " is out of service")
	case *reserve:
		send(ctx, a.g.supervisor, &reserved{b: m.b, p: a.p, why: providerDown(a.name), o: a.pol.Offer(now)})
	case *settle:
		if r := a.reserved[m.b]; r != nil {
			a.release(r, now)
			for _, c := range r.calls {
				c.answer(admitResult{err: providerDown(a.name)})
			}
		}
		delete(a.reserved, m.b)
		a.failedOffer(ctx, now)
	case *reconfigureProvider:
		m.ack(a.p, nil) // not sent: a reload rebuilds a provider out of service in a new slot
	case *retire:
		a.retiring = true
		m.ack(a.p, nil)
		a.retireDown(ctx)
	case *retireCheck:
		a.retireCheck(ctx, m)
	case *drainAll:
		a.draining = true
		if a.pol.Running() == 0 {
			send(ctx, a.g.supervisor, &providerIdle{p: a.p})
		}
	case *laneReport:
		for _, c := range m.calls {
			a.pol.Resume(c.member(m.m), c.started, c.key)
		}
		if m.m < len(a.reported) {
			a.reported[m.m] = true
		}
		if a.reportsDue && !slices.Contains(a.reported, false) {
			a.reportsDue = false
			a.failedOffer(ctx, now)
		}
	}
}

// finishFailed frees call c's lanes in a provider out of service.
func (a *providerActor) finishFailed(ctx actor.Context, c *call, now time.Time) {
	a.pol.Finish(c.id, now)
	a.failedOffer(ctx, now)
	if a.draining && a.pol.Running() == 0 {
		send(ctx, a.g.supervisor, &providerIdle{p: a.p})
	}
	a.retireDown(ctx)
}
