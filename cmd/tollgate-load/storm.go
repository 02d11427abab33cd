package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/tollgate/tollgate/cmd/internal/fakellm"
)

// stormClients hang up at random moments; their arrivals spread over stormSpread.
const (
	stormClients = 240
	stormSpread  = 300 * time.Millisecond
	stormMaxWait = 600 * time.Millisecond
)

// slowAnswer keeps a call running about 200 ms, long enough to be cut mid-stream.
var slowAnswer = fakellm.Options{Latency: 10 * time.Millisecond, Chunks: 20, ChunkInterval: 10 * time.Millisecond}

// cancelStorm sends clients that each hang up after a random time: some while queued, some
// while streaming, some never (their answer came first). Afterwards the backends must have
// seen their calls end early (client-gone), every backend call must be accounted for, the
// gateway must be idle and the goroutines back to baseline.
func cancelStorm(ctx context.Context, o runOpts) []*result {
	body := func(e *env, r *result) {
		e.hangUps = true
		rng := rand.New(rand.NewPCG(o.seed, 2))
		ids := e.models(o)
		calls := make([]call, stormClients)
		arrive := make([]time.Duration, stormClients)
		hangUp := make([]time.Duration, stormClients)
		for i := range calls {
			calls[i] = call{model: ids[rng.IntN(len(ids))], stream: rng.IntN(2) == 0, tag: fmt.Sprintf("s%d", i),
				priority: []string{"interactive", "normal", "background"}[rng.IntN(3)]}
			arrive[i] = time.Duration(rng.Int64N(int64(stormSpread)))
			hangUp[i] = 10*time.Millisecond + time.Duration(rng.Int64N(int64(stormMaxWait)))
		}
		outs := fire(ctx, e, calls, func(i int) (time.Duration, time.Duration) { return arrive[i], hangUp[i] })
		r.add(outs)
		before := count(outs, func(o outcome) bool { return o.cancelled && !o.gotHeader })
		after := count(outs, func(o outcome) bool { return o.cancelled && o.gotHeader })
		if before == 0 || after == 0 {
			r.breach("the storm did not exercise both hang-ups: %d before headers, %d after", before, after)
		}
		if e.local != nil {
			checkClientGone(ctx, e, r)
		}
	}
	if o.target != "" {
		return []*result{runTarget(ctx, "cancel-storm", o, body)}
	}
	return []*result{runLocal(ctx, "cancel-storm", multi(20, 64, slowAnswer), stormClients, body)}
}

// checkClientGone waits (with a deadline: a backend notices a closed connection a moment
// after the gateway closed it) until every backend call has ended, then checks the backends
// saw hang-ups and that each call ended exactly one way.
func checkClientGone(ctx context.Context, e *env, r *result) {
	deadline := time.Now().Add(2 * time.Second)
	var req, done, gone, rejected int64
	for {
		req, done, gone, rejected = 0, 0, 0, 0
		for _, b := range e.local.backends {
			st := b.fake.Stats()
			req, done, gone, rejected = req+st.Requests, done+st.Completed, gone+st.ClientGone, rejected+st.Rejected
		}
		if req == done+gone+rejected || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(2 * time.Millisecond) // polling with a deadline
	}
	r.Figures["backend_requests"] = float64(req)
	r.Figures["backend_completed"] = float64(done)
	r.Figures["backend_client_gone"] = float64(gone)
	if req != done+gone+rejected {
		r.breach("backend calls unaccounted for 2s after the storm: %d requests, %d completed, %d client-gone, %d rejected",
			req, done, gone, rejected)
	}
	if gone == 0 {
		r.breach("no backend saw a client go away: cancellations did not reach the backends")
	}
}
