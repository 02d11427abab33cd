package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/tollgate/tollgate/cmd/internal/fakellm"
)

// The noisy-neighbour scenario (SPEC §18): one provider of 4 lanes whose backend holds
// every call 300 ms, shared by client keys. Three phases on one gateway:
//
//  1. key A alone bursts 200 calls: its throughput;
//  2. A bursts 200 again while key B sends one call a second: B waits at most one service
//     time (plus 100 ms) in the queue, p99, since fair queuing starts B's call at the next
//     free lane instead of behind A's backlog; and the lanes stay as busy as with A alone
//     (work-conserving: B's idle share goes to A): the share of the time something waits
//     with every lane running (nnSampler) within 5 % of A alone's; the throughputs are
//     reported;
//  3. keys H (weight 3) and L (weight 1) burst together: while both are backlogged, starts
//     split 3:1 within 10 %.
//
// Every call is answered 200 and the gateway is idle after. The timings are invariants in
// the harness's own runs and targets under go test.
func init() {
	scenarios = append(scenarios, scenario{name: "noisy-neighbour", localOnly: true,
		about: "4 lanes, 300 ms calls: key A bursts 200 while key B sends one a second; B's queue wait p99 ≤ 400 ms, the lanes as busy as with A alone, keys weighted 3:1 split starts 3:1",
		run:   noisyNeighbour})
}

const (
	nnLanes   = 4
	nnService = 300 * time.Millisecond
	nnBurst   = 200
	nnEvery   = time.Second
	// Phase 3: H's and L's bursts, and the starts counted while both are backlogged (after
	// the first lanes' worth, made before the second burst could arrive).
	nnHeavy, nnLight, nnCounted = 80, 40, 80
)

// nnKeys are the client keys of the scenario: name, weight.
var nnKeys = []struct {
	name   string
	weight int
}{{"a", 1}, {"b", 1}, {"h", 3}, {"l", 1}}

func nnKey(name string) string { return "tg-noisy-" + name }

func noisyNeighbour(ctx context.Context, o runOpts) []*result {
	auth := "auth:\n  api_keys:\n"
	for _, k := range nnKeys {
		auth += fmt.Sprintf("    - {name: %s, key: %q, weight: %d}\n", k.name, nnKey(k.name), k.weight)
	}
	s := setup{name: "4 lanes, 300 ms calls, four keys", maxRunning: 10, maxAdmitted: 2 * nnBurst, auth: auth, adminKey: nnKey("a"),
		providers: []provider{{name: "shared", lanes: nnLanes, queueLength: 2 * nnBurst, queueTimeout: time.Minute,
			backend: fakellm.Options{Latency: nnService, Chunks: 1}, models: []model{{"m", nnLanes}}}}}
	return []*result{runLocal(ctx, "noisy-neighbour", s, 2*nnBurst, func(e *env, r *result) {
		sample := nnSampler(ctx, e)
		aOuts := nnBurstOf(ctx, e, r, "a", nnBurst)
		aloneBusy := sample()
		aloneRate := nnRate(nnDone(aOuts), nil)
		r.Figures["a_alone_calls_per_s"], r.Figures["a_alone_lanes_busy"] = aloneRate, aloneBusy
		if !nnIdle(ctx, e, r, "A's burst alone") {
			return
		}
		sample = nnSampler(ctx, e)
		aOuts, bOuts, bDone := nnWithNeighbour(ctx, e, r)
		busy := sample()
		rate := nnRate(nnDone(aOuts), bDone)
		r.Figures["a_with_b_calls_per_s"], r.Figures["a_with_b_lanes_busy"] = rate, busy
		var bWaits []float64
		for _, o := range bOuts {
			if o.queueMs >= 0 {
				bWaits = append(bWaits, float64(o.queueMs))
			}
		}
		sort.Float64s(bWaits)
		p99 := percentile(bWaits, 99)
		r.Figures["b_calls"], r.Figures["b_queue_ms_p99"] = float64(len(bWaits)), p99
		limit := float64((nnService + 100*time.Millisecond).Milliseconds())
		off := math.Abs(busy-aloneBusy) / max(aloneBusy, 0.01)
		r.Figures["lanes_busy_off_alone_pct"] = 100 * off
		r.Figures["throughput_off_alone_pct"] = 100 * math.Abs(rate-aloneRate) / aloneRate
		if len(bWaits) < 5 {
			r.breach("B sent %d calls during A's burst; the scenario needs several", len(bWaits))
		}
		switch {
		case o.timed && p99 > limit:
			r.breach("B's queue wait p99 %.0f ms beside A's burst, want ≤ %.0f (one service time + 100 ms)", p99, limit)
		case o.timed && off > 0.05:
			r.breach("with B mostly idle every lane ran in %.3f of the moments something waited, against %.3f with A alone (%.2f and %.2f calls/s): %.1f%% off, want ≤ 5%%",
				busy, aloneBusy, rate, aloneRate, 100*off)
		case !o.timed:
			r.target("B's queue wait p99, ms, beside A's burst", p99, fmt.Sprintf("≤ %.0f", limit), p99 <= limit)
			r.target("lanes busy with B beside A, off A alone's", off, "≤ 0.05", off <= 0.05)
		}
		if !nnIdle(ctx, e, r, "A's burst beside B") {
			return
		}
		nnWeighted(ctx, e, r)
	})}
}

// nnBurstOf sends n calls of key name at once and returns their outcomes; every one must
// succeed.
func nnBurstOf(ctx context.Context, e *env, r *result, name string, n int) []outcome {
	outs := fire(ctx, e, nnCalls(name, n), nil)
	nnAllServed(r, name, outs)
	return outs
}

// nnDone is when each call of a burst was answered, from the burst's start, in order.
func nnDone(outs []outcome) []time.Duration {
	done := make([]time.Duration, len(outs))
	for i, o := range outs {
		done[i] = o.total
	}
	slices.Sort(done)
	return done
}

// nnRate is the lanes' throughput while the burst answered at burst (sorted) kept them
// busy: the calls answered between its 10th and its 90th percentile answers, the burst's
// and others', per second. Leaving out the burst's first and last tenth leaves out its
// start (every lane starting at once) and its tail (lanes idle as the queue runs dry).
func nnRate(burst, others []time.Duration) float64 {
	from, to := burst[len(burst)/10], burst[len(burst)*9/10]
	n := len(burst)*9/10 - len(burst)/10
	for _, d := range others {
		if d > from && d <= to {
			n++
		}
	}
	return float64(n) / (to - from).Seconds()
}

// nnSampler polls /admin/state until stopped and returns the share of the samples with a
// call queued in which every lane was running: 1 when the policy is work-conserving (no
// lane idle while something waits), less by the moments between a finish and the next
// start. Unlike a throughput, it does not move with the machine's speed, which the harness
// shares with other work.
func nnSampler(ctx context.Context, e *env) (stop func() float64) {
	done := make(chan struct{})
	result := make(chan float64, 1)
	go func() { // exits when stopped
		waiting, busy := 0, 0
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				result <- float64(busy) / float64(max(waiting, 1))
				return
			case <-tick.C:
			}
			st, err := e.state(ctx)
			if err != nil || len(st.Providers) == 0 || st.Queued == 0 {
				continue
			}
			waiting++
			if st.Providers[0].Running == nnLanes {
				busy++
			}
		}
	}()
	return func() float64 { close(done); return <-result }
}

func nnCalls(name string, n int) []call {
	calls := make([]call, n)
	for i := range calls {
		calls[i] = nnCall(name, i)
	}
	return calls
}

func nnCall(name string, i int) call {
	return call{model: "shared/m", key: nnKey(name), tag: fmt.Sprintf("%s%d", name, i)}
}

// nnIdle reports whether the gateway is idle within 2 s of phase's end, recording a breach
// if not.
func nnIdle(ctx context.Context, e *env, r *result, phase string) bool {
	st, err := e.waitState(ctx, 2*time.Second, idle)
	if err != nil {
		r.breach("not idle within 2s of %s: running %d, queued %d (%v)", phase, st.Running, st.Queued, err)
		return false
	}
	return true
}

func nnAllServed(r *result, name string, outs []outcome) {
	r.add(outs)
	if bad := len(outs) - count(outs, ok); bad > 0 {
		r.breach("%d of key %s's %d calls were not served", bad, name, len(outs))
	}
}

// nnWithNeighbour runs A's burst while B sends a call every nnEvery until A's calls are all
// answered. It returns A's and B's outcomes, and when B's were answered from the burst's
// start.
func nnWithNeighbour(ctx context.Context, e *env, r *result) (aOuts, bOuts []outcome, bDone []time.Duration) {
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	stop := make(chan struct{})
	start := time.Now()
	wg.Add(1)
	go func() { // B's sender: exits when A's burst is answered
		defer wg.Done()
		tick := time.NewTicker(nnEvery)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			wg.Add(1)
			go func() { // one B call: exits when it is answered
				defer wg.Done()
				out := send(ctx, e.client, e.base, nnCall("b", i))
				mu.Lock()
				bOuts, bDone = append(bOuts, out), append(bDone, time.Since(start))
				mu.Unlock()
			}()
		}
	}()
	aOuts = fire(ctx, e, nnCalls("a", nnBurst), nil)
	close(stop)
	wg.Wait()
	nnAllServed(r, "a", aOuts)
	nnAllServed(r, "b", bOuts)
	return aOuts, bOuts, bDone
}

// nnWeighted bursts H (weight 3) and L (weight 1) together and checks the split of the
// starts made while both were backlogged, in the order of their queue waits.
func nnWeighted(ctx context.Context, e *env, r *result) {
	calls := append(nnCalls("h", nnHeavy), nnCalls("l", nnLight)...)
	outs := fire(ctx, e, calls, nil)
	nnAllServed(r, "h and l", outs)
	order := slices.Clone(outs)
	sort.SliceStable(order, func(i, j int) bool { return order[i].queueMs < order[j].queueMs })
	heavy := 0
	for _, o := range order[nnLanes : nnLanes+nnCounted] {
		if o.call.key == nnKey("h") {
			heavy++
		}
	}
	want := float64(nnCounted) * 3 / 4
	r.Figures["weighted_heavy_starts"], r.Figures["weighted_light_starts"] = float64(heavy), float64(nnCounted-heavy)
	if math.Abs(float64(heavy)-want) > 0.1*want {
		r.breach("weights 3:1 both backlogged: %d:%d of %d starts, want %.0f:%.0f within 10%%",
			heavy, nnCounted-heavy, nnCounted, want, float64(nnCounted)-want)
	}
}
