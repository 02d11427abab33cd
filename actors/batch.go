package actors

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tollgate/tollgate/actors/policy"
	"github.com/tollgate/tollgate/actors/policy/breaker"
	"github.com/tollgate/tollgate/actors/replicas"
	"github.com/tollgate/tollgate/providers/llm"
)

// Batches (SPEC §5): every member starts at the same instant, or none does; a batch never
// queues. The decision is one two-phase step in the admission core. The supervisor holds the
// batch's global slots in its dispatcher (Hold) and asks each provider concerned to reserve
// its members (reserve): a provider starts them in its policy only if all of them can start
// now, with no waiting request passed (policy.Provider.Reserve), and answers with its offer
// (reserved). When every provider has reserved, the supervisor commits (settle) and the
// providers hand the members to their lanes; when any could not, it aborts and the others
// free what they reserved. Nothing runs in a refusal: the backends are called only after
// the commit.

// MaxBatch is the most models one batch may name (SPEC §5).
const MaxBatch = 10

// batchCall is one batch on its way through the admission core: written once by
// StartBatch before it is sent, but for its answer. Where it stands at the supervisor is
// the supervisor's core's (policy.Supervisor), by its id.
type batchCall struct {
	id      policy.BatchID
	members []*call         // in request order
	by      map[int][]*call // by provider index
	reply   chan error      // the batch's one decision: nil (committed) or the refusal
	answer  sync.Once       // reply is written once
	// leases are the members' holds on the replicas' shared limits, by member, taken by
	// StartBatch before it sends the batch (shared.go) and read-only after.
	leases map[policy.ID]memberLease
}

// memberLease is one batch member's lease and the shared buckets it charged.
type memberLease struct {
	lease   replicas.Lease
	charged []replicas.Bucket
}

func (b *batchCall) decide(err error) {
	b.answer.Do(func() { b.reply <- err })
}

// providers is each member's provider, in request order.
func (b *batchCall) providers() []int {
	ps := make([]int, len(b.members))
	for i, c := range b.members {
		ps[i] = c.route.p
	}
	return ps
}

// startBatch, from Gateway.StartBatch to the supervisor.
type startBatch struct{ b *batchCall }

// reserve, from the supervisor to a provider actor: start these members now or not at all.
type reserve struct {
	b     *batchCall
	calls []*call
}

// reserved, from a provider actor to the supervisor: whether it reserved its members, why
// not, and its offer (which counts them as running when it did).
type reserved struct {
	b   *batchCall
	p   int
	ok  bool
	why *llm.Error
	o   policy.Offer
}

// reservation is a provider's part of a batch between reserve and settle: its members,
// running in its policy and on no lane yet.
type reservation struct {
	calls []*call
	pol   policy.Reservation
}

// settle, from the supervisor to a provider actor: run the batch's members (commit) or free
// them.
type settle struct {
	b      *batchCall
	commit bool
}

// StartBatch admits a batch: models in request order, each member a copy of req for its
// model. It returns one member per model once all have started and their backends have
// opened (every member's backend call has begun before any member's first byte reaches the
// client), or the batch's refusal: 404 for an unknown model, 400 batch_too_large or
// batch_exceeds_provider_capacity (it can never start: nothing was asked of any provider),
// 429 batch_capacity_unavailable (it could, but not now). A member whose backend fails to
// open has its error and no stream; the others go on.
func (g *Gateway) StartBatch(ctx context.Context, models []string, prio llm.Priority, req *llm.Request) ([]llm.BatchMember, error) {
	if len(models) > MaxBatch {
		return nil, &llm.Error{Kind: llm.KindBatchTooLarge, Param: "models",
			Message: fmt.Sprintf("a batch names at most %d models, this one %d", MaxBatch, len(models))}
	}
	t := g.table.Load()
	b := &batchCall{id: policy.BatchID(g.nextID.Add(1)), by: map[int][]*call{}, reply: make(chan error, 1)}
	for i, id := range models {
		r, ok := t.lookup(id)
		if !ok {
			err := g.table.Load().notFound(id)
			err.Param = fmt.Sprintf("models[%d]", i)
			return nil, err
		}
		if err := r.refuses(req); err != nil {
			err.Param = fmt.Sprintf("models[%d]", i)
			return nil, err
		}
		if err := g.refusing(&r); err != nil {
			return nil, err
		}
		breq := *req
		breq.Model = r.model
		c := &call{id: policy.ID(g.nextID.Add(1)), ctx: ctx, req: &breq, route: r, prio: prio, client: llm.ClientOf(ctx),
			reply: make(chan admitResult, 1), tokens: g.estimate(&r, req), batch: true}
		b.members = append(b.members, c)
		b.by[r.p] = append(b.by[r.p], c)
	}
	if err := b.fits(t, g.caps.Load().limits.MaxRunning); err != nil {
		return nil, err
	}
	refund, err := g.rates.reserveBatch(llm.ClientOf(ctx), b.members)
	if err != nil {
		return nil, err
	}
	if err := g.leaseBatch(ctx, b); err != nil {
		refund()
		return nil, err
	}
	send(g.system.Root, g.supervisor, &startBatch{b: b})
	select {
	case err := <-b.reply:
		if err != nil {
			unleaseBatch(b)
			refund()
			return nil, err
		}
	case <-g.stopped:
		unleaseBatch(b)
		refund()
		return nil, &llm.Error{Kind: llm.KindDraining, Message: "the gateway is shutting down"}
	}
	return b.open(g.stopped), nil // committed: every member is answered by its lane with its stream
}

// open takes each committed member's answer (call.await) and opens every backend before any is
// read: all begin before any first byte.
func (b *batchCall) open(stopped <-chan struct{}) []llm.BatchMember {
	out := make([]llm.BatchMember, len(b.members))
	streams := make([]*stream, len(b.members))
	for i, c := range b.members {
		res := c.await(stopped)
		out[i].Model, out[i].Provider, out[i].QueueWait = c.route.id, c.route.provider, res.queueWait
		if res.err != nil {
			out[i].Err = res.err
			continue
		}
		streams[i] = res.stream
	}
	var wg sync.WaitGroup
	for i, s := range streams {
		if s == nil {
			continue
		}
		wg.Go(func() { // exits when the backend has answered Open
			if err := s.open(); err != nil {
				out[i].Err = err
				return
			}
			out[i].Stream, out[i].Attempts = s, s.attempts
		})
	}
	wg.Wait()
	return out
}

// fits refuses, before asking anyone, a batch that can never start: more members of a
// provider than its configured lanes, of a model than its model lanes, or in all than
// max_running (SPEC §5: 400 batch_exceeds_provider_capacity, listing only the scopes that
// overflow). Learned lanes below the configured ones are not this: such a batch could fit
// again, and is told 429 by the provider.
func (b *batchCall) fits(t *modelTable, maxRunning int) error {
	var over []llm.ScopeLimit
	var providers []int
	for _, c := range b.members {
		if !slices.Contains(providers, c.route.p) {
			providers = append(providers, c.route.p)
		}
	}
	for _, p := range providers {
		pv := &t.provs[p].Provider
		if n := len(b.by[p]); n > pv.Lanes {
			over = append(over, llm.ScopeLimit{Provider: pv.Name, Requested: n, Limit: pv.Lanes})
		}
		counted := map[int]bool{}
		for _, c := range b.by[p] {
			if counted[c.route.m] {
				continue
			}
			counted[c.route.m] = true
			n := 0
			for _, o := range b.by[p] {
				if o.route.m == c.route.m {
					n++
				}
			}
			if lanes := t.model(p, c.route.m).Lanes; n > lanes {
				over = append(over, llm.ScopeLimit{Provider: pv.Name, Model: c.route.id, Requested: n, Limit: lanes})
			}
		}
	}
	if n, mr := len(b.members), maxRunning; n > mr {
		over = append(over, llm.ScopeLimit{Requested: n, Limit: mr})
	}
	if len(over) == 0 {
		return nil
	}
	parts := make([]string, len(over))
	for i, o := range over {
		switch {
		case o.Model != "":
			parts[i] = fmt.Sprintf("%d members of model %s, which runs at most %d at once (model_lanes)", o.Requested, o.Model, o.Limit)
		case o.Provider != "":
			parts[i] = fmt.Sprintf("%d members of provider %s, which has %d lanes", o.Requested, o.Provider, o.Limit)
		default:
			parts[i] = fmt.Sprintf("%d members in all, while the gateway runs at most %d at once (max_running)", o.Requested, o.Limit)
		}
	}
	return &llm.Error{Kind: llm.KindBatchImpossible, Param: "models", Limits: over,
		Message: "this batch can never start all its members at once: " + strings.Join(parts, "; ")}
}

// batch begins a batch at the supervisor: its core holds its global slots and asks its
// providers to reserve (policy.Supervisor.BeginBatch).
func (s *supervisor) batch(ctx actor.Context, b *batchCall) {
	s.admitting[b.id] = b
	s.apply(ctx, s.core.BeginBatch(b.id, b.providers()))
}

// reservedBy takes one provider's answer; the last one decides the batch. The answer for a
// batch the core no longer admits (a rebuilt supervisor forgot it) is freed by the
// effects: the batch is named for them alone.
func (s *supervisor) reservedBy(ctx actor.Context, m *reserved) {
	if _, ok := s.admitting[m.b.id]; !ok {
		s.admitting[m.b.id] = m.b
		defer delete(s.admitting, m.b.id)
	}
	var why error
	if m.why != nil {
		why = m.why
	}
	s.apply(ctx, s.core.Reserved(m.b.id, m.p, m.ok, why, m.o))
}

// applyBatches carries out what the core decided of batches: reservations to ask for,
// settlements, and each decided batch's one answer.
func (s *supervisor) applyBatches(ctx actor.Context, fx *policy.SupervisorEffects) {
	for _, r := range fx.Reserve {
		b := s.admitting[r.ID]
		send(ctx, s.providers[r.Provider], &reserve{b: b, calls: b.by[r.Provider]})
	}
	for _, st := range fx.Settle {
		send(ctx, s.providers[st.Provider], &settle{b: s.admitting[st.ID], commit: st.Commit})
	}
	for _, d := range fx.Decided {
		b := s.admitting[d.ID]
		delete(s.admitting, d.ID)
		b.decide(s.batchAnswer(b, d))
	}
}

// batchAnswer is the error a batch's decision is answered with: nil when it committed.
func (s *supervisor) batchAnswer(b *batchCall, d policy.BatchDecision) error {
	switch d.Outcome {
	case policy.BatchCommitted:
		return nil
	case policy.BatchFailed:
		return d.Why
	case policy.BatchRefused:
		return &llm.Error{Kind: llm.KindBatchCapacity, RetryAfter: s.g.RetryAfter(),
			Message: fmt.Sprintf("the gateway runs %d of its %d requests at once (max_running); the batch needs %d free at the same time",
				s.core.Running(), s.core.Limits().MaxRunning, len(b.members))}
	case policy.BatchDraining:
		return &llm.Error{Kind: llm.KindDraining, Message: "the gateway is shutting down"}
	case policy.BatchRetired:
		return s.g.table.Load().notFound(b.members[d.Member].route.id) // a reload removed its provider meanwhile
	case policy.BatchStopped:
		return errStopping()
	default: // policy.BatchForgotten
		return &llm.Error{Kind: llm.KindBatchCapacity, RetryAfter: time.Second,
			Message: "internal fault: the gateway's supervisor restarted while admitting this batch; nothing ran, try again"}
	}
}

// reserve is a provider's part of a batch: all its members start in its policy now, or none.
func (bp batchPart) reserve(ctx actor.Context, m *reserve) {
	a := bp.a
	now := a.g.now()
	for _, c := range m.calls {
		if a.retiring || a.gone[c.route.m] { // a reload removed it after the batch looked it up
			send(ctx, a.g.supervisor, &reserved{b: m.b, p: a.p, why: a.g.table.Load().notFound(c.route.id), o: a.pol.Offer(now)})
			return
		}
	}
	members := make([]policy.Member, len(m.calls))
	for i, c := range m.calls {
		members[i] = c.member(c.route.m)
	}
	// The start cap follows the breaker, whose period may have ended since it was last set:
	// an open breaker turns half-open with time alone.
	a.pol.Lanes().SetStartCap(a.health.StartCap(now))
	// The wait a batch refused for lanes is told (batchRefusal's, before what only other
	// blockers add): its second try after it keeps the lanes for it.
	wait := max(a.g.RetryAfter(), a.pol.Limiters().RetryAfter(batchTokens(m.calls), now))
	res, blocker, ok := a.pol.Reserve(members, wait, now)
	var why *llm.Error
	if ok {
		for i, c := range m.calls {
			r := run{c: c, started: now, key: res.Keys[i]}
			// The half-open probe is taken now, not at the commit: until then no other call
			// may become one. The cap let every member start, so the breaker allows each.
			a.vitals.allow(&r, now)
			a.runs[c.id] = r
		}
		a.pol.Lanes().SetStartCap(a.health.StartCap(now))
		a.reserved[m.b] = &reservation{calls: m.calls, pol: res}
	} else {
		why = bp.batchRefusal(blocker, m.calls, now)
	}
	send(ctx, a.g.supervisor, &reserved{b: m.b, p: a.p, ok: ok, why: why, o: a.pol.Offer(now)})
	a.arm(ctx, now)
}

// settleBatch runs a batch's reserved members or frees them (with the rate limiter's tokens
// when it can, see policy.Provider.Release). Each member leaves the reservation as it is
// handed to its lane, so a settle sent again after a crash starts only what was left.
func (bp batchPart) settleBatch(ctx actor.Context, m *settle) {
	a := bp.a
	now := a.g.now()
	if r := a.reserved[m.b]; r != nil && m.commit {
		for len(r.calls) > 0 {
			c := r.calls[0]
			r.calls = r.calls[1:]
			bp.run(ctx, m.b, a.runs[c.id], now)
		}
	} else if r != nil {
		bp.release(r, now)
	}
	delete(a.reserved, m.b)
	a.offer(ctx, now)
}

// run hands a reserved member to its lane, or frees it when the breaker opened after the
// reservation: the member does not start then (the probe, reserved with it, does), and
// gives back what it holds.
func (bp batchPart) run(ctx actor.Context, b *batchCall, r run, now time.Time) {
	a := bp.a
	c, ml := r.c, b.leases[r.c.id]
	if !r.probe && a.health.BreakerState(now) != breaker.Closed {
		a.pol.Finish(c.id, now)
		delete(a.runs, c.id)
		if l := ml.lease; l != nil {
			go l.Release() // exits after one bounded round trip to the shared state
		}
		c.answer(admitResult{err: a.vitals.circuitOpen(now)})
		return
	}
	a.vitals.began(&r, r.key, r.started) // the retry budget, the lanes: as a grant's start, when it reserved
	a.runs[c.id] = r
	m := &startCall{c: c}
	m.run.set(&a.pv, &r, r.started, time.Time{})
	if ml.lease != nil {
		m.run.shared = &startShared{keyName: r.keyName, lease: ml.lease, charged: a.peers.chargeKey(&r, ml)}
	}
	send(ctx, a.lanes[c.route.m], m)
}

// release frees a reservation that will not run: its lanes and tokens, and the breaker's
// probe if a member took it (the next call may be the probe).
func (bp batchPart) release(r *reservation, now time.Time) {
	a := bp.a
	a.pol.Release(&r.pol, now)
	for _, c := range r.calls {
		if rr, ok := a.runs[c.id]; ok {
			a.vitals.neutral(&rr, now)
			delete(a.runs, c.id)
		}
	}
}

// batchPart is the provider actor's part of batches: it reserves a batch's members in its
// policy all at once or none, says why not, and starts or frees them when the supervisor
// settles the batch.
type batchPart struct{ a *providerActor }
