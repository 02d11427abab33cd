package actors

import (
	"context"
	"errors"
	"time"

	"github.com/tollgate/tollgate/actors/policy"
	"github.com/tollgate/tollgate/actors/policy/affinity"
	"github.com/tollgate/tollgate/actors/policy/retry"
	"github.com/tollgate/tollgate/providers/llm"
)

// Start admits a call and blocks until it is running or turned away. On success the caller
// owns the returned stream and must Close it; that gives the lanes back once the backend has
// stopped (if the backend stops first, its lanes are back already). The returned Served
// describes the call also with an error. If ctx ends first, Start withdraws the call and
// returns ctx's error.
//
// A route (SPEC §12) picks the model first. The model's admission, attempts and retries
// follow (serve); when they end in a failure its fallback_on names, the call moves to the
// model's fallbacks in order, each entering that model's admission with the call's original
// arrival and priority. A fallback's own fallbacks are never followed, so there are no loops.
func (g *Gateway) Start(ctx context.Context, model string, prio llm.Priority, req *llm.Request) (llm.Served, error) {
	// The routes live in chain, not in this frame: the backend call runs below it, on the
	// HTTP server's connection goroutine, whose stack should stay in its first 8 KiB while
	// calls are held (docs/benchmarks.md, "The connection goroutine's stack").
	arrived := g.now()
	b, bound := g.sessions.lookup(ctx, req.Conversation, arrived)
	chain, err := g.chain(model, req, b, bound)
	if err != nil {
		return llm.Served{}, err
	}
	client := llm.ClientOf(ctx)
	waiting, err := g.admitClient(client)
	if err != nil {
		return llm.Served{}, err
	}
	defer waiting.out()
	charge, err := g.rates.await(ctx, client, &chain[0], req)
	if err != nil {
		return llm.Served{}, err
	}
	sv := llm.Served{QueueWait: charge.wait}
	defer func() {
		if sv.Stream == nil && sv.Attempts == 0 { // it never reached a backend
			g.rates.refund(client, charge)
		}
	}()
	for i := range chain {
		cand := &chain[i]
		if i > 0 {
			sv.Fallbacks = append(sv.Fallbacks, chain[i-1].id)
			if o := g.opts.Observer; o != nil {
				o.FellBack(chain[0].id, cand.id)
			}
		}
		sv.Model, sv.Provider = cand.id, cand.provider
		s, err := g.serve(ctx, cand, prio, req, arrived, boundKey(b, bound, cand), charge, &waiting, &sv)
		if err == nil {
			sv.Stream = s
			sv.Affinity = g.sessions.bind(req.Conversation, affinity.Binding{Provider: cand.provider, Key: s.key, Model: cand.id}, g.now()).String()
			return sv, nil
		}
		if i == len(chain)-1 || ctx.Err() != nil || !chain[0].fallsBack(err) {
			return sv, err
		}
	}
	return sv, nil // unreachable: the last candidate returns
}

// chain is the routes a call on model goes through in turn: the model its id or route
// picks, then those of that model's fallbacks that serve the call's format. When the call's
// conversation is bound (b), its model is tried first if the route may pick it or it is one
// of the fallbacks (SPEC §19).
func (g *Gateway) chain(model string, req *llm.Request, b affinity.Binding, bound bool) ([]route, error) {
	t := g.table.Load()
	r, ok := t.resolveBound(model, req, b, bound)
	if !ok {
		return nil, g.table.Load().notFound(model)
	}
	if err := r.refuses(req); err != nil {
		return nil, err
	}
	chain := append(make([]route, 0, 1+len(r.fallback)), r)
	for _, id := range r.fallback {
		if fr, ok := t.lookup(id); ok && fr.id != r.id && fr.refuses(req) == nil {
			chain = append(chain, fr)
		}
	}
	if bound {
		preferBound(chain, b)
	}
	return chain, nil
}

// fallsBack reports whether a failure of the call on r's model sends it to r's fallbacks.
func (r *route) fallsBack(err error) bool {
	switch k := llm.KindOf(err); {
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return false
	case k == llm.KindUpstreamRateLimited:
		return r.on&OnRateLimited != 0
	case k == llm.KindQueueFull:
		return r.on&OnQueueFull != 0
	case k == llm.KindQueueTimeout:
		return r.on&OnQueueTimeout != 0
	case retry.ClassOf(err) == retry.Down:
		return r.on&OnUnavailable != 0 // a provider down, or its circuit open
	}
	return false
}

// serve admits the call on one model and opens it: its attempts and retries happen in open,
// and a capacity refusal sends it back to the head of its queue, as often as its provider
// allows. It adds its queue wait and attempts to sv. The call counts in its client's
// max_queued (waiting) while it waits for admission, not while it runs.
// bound is 1 + the key the call's conversation prefers at r's provider (0: none).
func (g *Gateway) serve(ctx context.Context, r *route, prio llm.Priority, req *llm.Request, arrived time.Time, bound int, charge keyCharge, waiting *clientWait, sv *llm.Served) (*stream, error) {
	if err := g.refusing(r); err != nil {
		return nil, err
	}
	breq := *req
	breq.Model = r.model
	c := &call{id: policy.ID(g.nextID.Add(1)), ctx: ctx, req: &breq, route: *r, prio: prio, client: llm.ClientOf(ctx),
		reply: make(chan admitResult, 1), arrived: arrived, tokens: g.estimate(r, req), bound: bound,
		keyWait: charge.wait, keyTokens: charge.tokens}
	for {
		waiting.again()
		res, err := g.admit(ctx, c)
		waiting.out()
		sv.QueueWait += res.queueWait
		if err != nil {
			return nil, err
		}
		if res.err != nil {
			return nil, res.err
		}
		err = res.stream.open()
		sv.Attempts += res.stream.attempts
		var rq *requeued
		if errors.As(err, &rq) {
			c = rq.next
			continue
		}
		if err != nil {
			return nil, err
		}
		return res.stream, nil
	}
}

// admit sends the call to its provider actor and waits for its one answer. If ctx ends
// first it withdraws the call and returns ctx's error (a stream it started meanwhile is
// closed, which gives its lanes back).
func (g *Gateway) admit(ctx context.Context, c *call) (admitResult, error) {
	sl := c.route.slot
	if !sl.enter() {
		return admitResult{}, g.table.Load().notFound(c.route.id) // removed by a reload after Start looked it up
	}
	to := sl.pid.Load()
	if to == nil { // published by a reload whose supervisor has not spawned it yet
		sl.leave()
		return admitResult{}, g.table.Load().notFound(c.route.id)
	}
	send(g.system.Root, to, &arrive{c: c})
	sl.leave()
	select {
	case res := <-c.reply:
		return res, nil
	case <-ctx.Done():
		send(g.system.Root, to, &withdraw{c: c})
		res := c.await(g.stopped) // every call is answered exactly once
		if res.stream != nil {
			_ = res.stream.Close() // started as the client left: this gives the lanes back
		}
		return admitResult{queueWait: res.queueWait}, ctx.Err()
	case <-g.stopped:
		return c.await(g.stopped), nil
	}
}

// estimate is what the call is charged in the tpm buckets before it runs (SPEC §10): its
// estimated prompt plus its output cap, at most the model's context window; 0 when no
// bucket of its provider counts tokens, so that the estimate costs nothing there. An
// embeddings call is charged its inputs alone, however many: it generates nothing, and the
// window bounds each input, not the call.
func (g *Gateway) estimate(r *route, req *llm.Request) int {
	if !r.counts {
		return 0
	}
	return keyEstimate(r, req)
}
