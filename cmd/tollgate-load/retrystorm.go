package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/tollgate/tollgate/actors"
	"github.com/tollgate/tollgate/cmd/internal/fakellm"
)

// The retry-storm scenario: the failure Tollgate exists to prevent. Six providers
// under 500 clients whose SDKs retry twice, as the official ones do; one provider first
// throttles inside HTTP 200 bodies (DashScope's Throttling.RateQuota, on both its keys), then
// goes down. Its keys rest and its circuit opens, so it sees a bounded number of attempts,
// and the others serve as they would without it. The same load first runs without the
// failure, for the comparison, in rounds that alternate with the failing ones: what else
// loads the machine then weighs on both sides alike.
const (
	rsRounds    = 2
	rsProviders = 6
	rsLoadFor   = 3 * time.Second
	rsDownAt    = 1200 * time.Millisecond // when the throttling provider goes down
	rsClientsN  = 500
	rsFailing   = "flaky"
	// rsP99Slack absorbs scheduling noise on a small shared machine on top of the 1.5×.
	rsP99Slack = 25 * time.Millisecond
)

// rsSetup: five healthy OpenAI-compatible providers and a DashScope one with two keys,
// four lanes each; max_running and max_admitted below the providers' lanes and queues, so
// the global caps bind too.
func rsSetup(name string) setup {
	b := fakellm.Options{Latency: 20 * time.Millisecond, Chunks: 8, ChunkInterval: 5 * time.Millisecond}
	s := setup{name: name, maxRunning: 20, maxAdmitted: 60}
	for i := range rsProviders - 1 {
		s.providers = append(s.providers, provider{name: fmt.Sprintf("p%d", i), lanes: 4, queueLength: 16,
			queueTimeout: 10 * time.Second, backend: b, models: []model{{"m", 4}}})
	}
	s.providers = append(s.providers, provider{name: rsFailing, kind: "qwen", keys: []string{"storm-key-a", "storm-key-b"},
		lanes: 4, queueLength: 16, queueTimeout: 10 * time.Second, backend: b, models: []model{{"m", 4}},
		extra: "    key_cooldown: 300ms\n    breaker: {failures: 5, ratio: 0.5, open_for: 1s}\n"})
	return s
}

func retryStorm(ctx context.Context, o runOpts) []*result {
	var results []*result
	var without, with []float64 // the healthy providers' queue waits (ms), pooled over rounds
	for round := range rsRounds {
		base := runLocal(ctx, "retry-storm", rsSetup(fmt.Sprintf("baseline, no failure, round %d", round+1)), rsClientsN, func(e *env, r *result) {
			without = append(without, rsLoad(ctx, e, r, o, false)...)
		})
		failing := runLocal(ctx, "retry-storm", rsSetup(fmt.Sprintf("%s throttles in 200s, then goes down, round %d", rsFailing, round+1)), rsClientsN, func(e *env, r *result) {
			with = append(with, rsLoad(ctx, e, r, o, true)...)
		})
		results = append(results, base, failing)
	}
	last := results[len(results)-1]
	b, f := summarize(without).P99, summarize(with).P99
	last.Figures["rounds_baseline_others_queue_p99_ms"], last.Figures["rounds_others_queue_p99_ms"] = b, f
	switch limit := 1.5*b + ms(rsP99Slack); {
	case !o.timed:
		last.target("the healthy providers' p99 queue wait, ms, with the failure (every round)", f, fmt.Sprintf("≤ 1.5 × %.1f + %v", b, rsP99Slack), f <= limit)
	case f > limit:
		last.breach("the healthy providers' p99 queue wait over %d rounds was %.1f ms with the failure, %.1f ms without: above 1.5× (+%v)", rsRounds, f, b, rsP99Slack)
	}
	return results
}

// rsLoad runs the clients for rsLoadFor, with the failure when fail is set, then lets
// the failing provider recover and checks the invariants. It returns the queue waits (ms)
// of the healthy providers' served calls.
func rsLoad(ctx context.Context, e *env, r *result, o runOpts, fail bool) []float64 {
	fb := e.local.backends[rsProviders-1]
	if fail {
		mustScript(r, fb.fake, fakellm.Script{Keys: map[string]fakellm.KeyScript{
			"storm-key-a": {Mode: "throttle-200"}, "storm-key-b": {Mode: "throttle-200"}}})
	}
	samples := sampleState(e)
	start := time.Now()
	down := time.AfterFunc(rsDownAt, func() { // its goroutine only sets the script and exits
		if fail {
			mustScript(r, fb.fake, fakellm.Script{Models: map[string]fakellm.ModelScript{"m": {Mode: "down"}}})
		}
	})
	defer down.Stop()
	outs := rsClients(ctx, e, o.seed, start.Add(rsLoadFor))
	if fail {
		mustScript(r, fb.fake, fakellm.Script{}) // the backend recovers
		recoverProvider(ctx, e, r)
	}
	span := time.Since(start)
	st := samples.stop()
	for i := range outs {
		if outs[i].call.model == rsFailing+"/m" && outs[i].status == 503 && outs[i].code == "provider_unavailable" {
			outs[i].breach = "" // the failing provider is down or its circuit open: honestly said
		}
	}
	r.add(outs)
	var others []float64
	for _, out := range outs {
		if out.status == 200 && !strings.HasPrefix(out.call.model, rsFailing+"/") {
			others = append(others, float64(out.queueMs))
		}
	}
	r.Figures["others_queue_p99_ms"] = summarize(others).P99
	r.Figures["max_admitted_seen"], r.Figures["max_queued_seen"] = float64(st.maxAdmitted), float64(st.maxQueued)
	// SPEC §2: a request that cannot start is refused at max_admitted; one that can start
	// does, so running + queued may pass it by the starts alone, never by more than max_running.
	if st.maxQueued > e.setup.maxAdmitted || st.maxAdmitted > e.setup.maxAdmitted+e.setup.maxRunning {
		r.breach("admitted %d (queued %d) seen; max_admitted is %d, max_running %d", st.maxAdmitted, st.maxQueued, e.setup.maxAdmitted, e.setup.maxRunning)
	}
	if !fail {
		return others
	}
	rsBudget(r, fb, span)
	// The probe's client has its answer before the provider actor hears how the call ended
	// (the stream tells its lane, the lane the provider), so the breaker closes a moment
	// after recoverProvider returns: wait for it, bounded.
	st2, err := e.waitState(ctx, 2*time.Second, func(st actors.AdminState) bool {
		p := providerState(st, rsFailing)
		return p != nil && p.Breaker != nil && p.Breaker.State == "closed"
	})
	if err != nil {
		r.breach("the failing provider's breaker is not closed within 2s of its recovery: %s", breakerOf(st2, rsFailing))
	}
	if !st.sawOpen {
		r.breach("the failing provider's breaker never opened: the scenario did not take it down")
	}
	return others
}

// breakerOf describes provider name's breaker and running calls for a breach message.
func breakerOf(st actors.AdminState, name string) string {
	p := providerState(st, name)
	switch {
	case p == nil:
		return "provider not in /admin/state"
	case p.Breaker == nil:
		return fmt.Sprintf("no breaker, %d running", p.Running)
	}
	return fmt.Sprintf("breaker %+v, %d running", *p.Breaker, p.Running)
}

// rsClients runs the clients until until, each calling a random provider's model like an
// SDK, and returns every call's last outcome.
func rsClients(ctx context.Context, e *env, seed uint64, until time.Time) []outcome {
	var mu sync.Mutex
	var outs []outcome
	var wg sync.WaitGroup
	ids := e.models(runOpts{})
	for c := range rsClientsN {
		wg.Go(func() { // exits at until (its last call answered), or when ctx ends
			rng := rand.New(rand.NewPCG(seed, uint64(c)))
			for n := 0; ctx.Err() == nil && time.Now().Before(until); n++ {
				cl := call{model: ids[rng.IntN(len(ids))], stream: rng.IntN(2) == 0, tag: fmt.Sprintf("c%dn%d", c, n)}
				o, _ := sendLikeSDK(ctx, e.client, e.base, cl, rng, until)
				mu.Lock()
				outs = append(outs, o)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return outs
}

// recoverProvider waits for the failing provider's probe to close its circuit: calls to it
// until one succeeds (bounded: the circuit opens for at most a few seconds here).
func recoverProvider(ctx context.Context, e *env, r *result) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if o := send(ctx, e.client, e.base, call{model: rsFailing + "/m", tag: "probe"}); o.status == 200 {
			return
		}
		time.Sleep(100 * time.Millisecond) // polling with a deadline, until the probe is due
	}
	r.breach("the failing provider did not serve again within 10s of recovering")
}

// rsBudget checks the failing provider's attempts against the retry budget: at most 20%
// of its calls are retries, plus 3 a second, over the whole run. A call is a distinct tag
// the backend saw; an attempt is a request it received.
func rsBudget(r *result, b *backend, span time.Duration) {
	tags := map[string]bool{}
	for _, t := range b.tap.arrivals() {
		tags[t] = true
	}
	calls, attempts := len(tags), int(b.fake.Stats().Requests)
	seconds := math.Ceil(span.Seconds()) + 1 // the seconds the run touched, for the 3/s floor
	bound := 1.2*float64(calls) + 3*seconds
	r.Figures["failing_calls"], r.Figures["failing_attempts"], r.Figures["failing_attempts_bound"] = float64(calls), float64(attempts), bound
	if float64(attempts) > bound {
		r.breach("the failing provider received %d attempts for %d calls in %.0fs: above calls × 1.2 + 3/s (%.0f)", attempts, calls, seconds, bound)
	}
}

func mustScript(r *result, f *fakellm.Server, sc fakellm.Script) {
	if err := f.SetScript(sc); err != nil {
		r.breach("script: %v", err)
	}
}

// stateSampler samples the gateway's state in process while a scenario runs.
type stateSampler struct {
	stopC chan struct{}
	done  chan stateSummary
}

type stateSummary struct {
	maxAdmitted, maxQueued int
	sawOpen                bool // the failing provider's breaker was seen open
	effective              []effSample
}

type effSample struct {
	at  time.Time
	eff int
}

// sampleState samples every 5 ms until stop: the admitted and queued totals, the breakers,
// and the first provider's effective lanes.
func sampleState(e *env) *stateSampler {
	s := &stateSampler{stopC: make(chan struct{}), done: make(chan stateSummary, 1)}
	g := e.local.app.Gateway
	go func() { // exits when stop closes stopC
		var sum stateSummary
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			st := g.State()
			admitted, queued := 0, 0
			for _, p := range st.Providers { // kept by admission: less those awaiting their verdict
				admitted += p.Running + p.Queued - p.AwaitingVerdict
				queued += p.Queued - p.AwaitingVerdict
			}
			sum.maxAdmitted = max(sum.maxAdmitted, admitted)
			sum.maxQueued = max(sum.maxQueued, queued)
			for _, p := range st.Providers {
				if p.Name == rsFailing && p.Breaker != nil && p.Breaker.State == "open" {
					sum.sawOpen = true
				}
			}
			if len(st.Providers) > 0 {
				sum.effective = append(sum.effective, effSample{time.Now(), st.Providers[0].EffectiveLanes})
			}
			select {
			case <-s.stopC:
				s.done <- sum
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *stateSampler) stop() stateSummary {
	close(s.stopC)
	return <-s.done
}
