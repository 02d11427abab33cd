package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// overloadSetup: four lanes, four queue places, max_admitted 8: every admitted call is held
// by the tap for the whole window, so the lanes stay busy and every other call is turned away.
func overloadSetup() setup {
	return setup{name: "held-4-lanes", maxRunning: 4, maxAdmitted: 8, providers: []provider{
		{name: "slow", lanes: 4, queueLength: 4, queueTimeout: 5 * time.Minute, backend: answer,
			models: []model{{"m", 4}}},
	}}
}

// overload fills every lane and queue place with held calls, then lets 10× max_admitted
// clients hammer the gateway for o.overloadFor. It measures 429s per second and their
// latency, and checks (by sampling the state and the backend) that the admitted work kept
// every lane busy throughout.
func overload(ctx context.Context, o runOpts) []*result {
	s := overloadSetup()
	hammers := 10 * s.maxAdmitted
	return []*result{runLocal(ctx, "overload", s, hammers+s.maxAdmitted, func(e *env, r *result) {
		occupiers := make(chan outcome, s.maxAdmitted)
		for range s.maxAdmitted {
			go func() { occupiers <- send(ctx, e.client, e.base, call{model: "slow/m", hold: true, tag: "occupier"}) }() // exits when released and answered
		}
		if _, err := e.waitState(ctx, 2*time.Second, func(st stateDoc) bool { return st.Running == 4 && st.Queued == 4 }); err != nil {
			r.breach("occupiers did not fill the lanes and queue: %v", err)
		}
		tp := e.local.backends[0].tap
		stopSampling := sampleBusyLanes(e, tp, s.maxRunning)
		// Phase 1, closed loop: every client sends its next call as soon as the last is
		// answered; the rate reached is the gateway's (and these clients') capacity.
		closed := hammer(ctx, e, hammers, o.overloadFor, 0)
		// Phase 2, open loop: the same clients send on a fixed schedule adding up to
		// o.overloadRate; latency counts from when a call was due, not when it was sent, so a
		// client falling behind shows up in the figures instead of hiding.
		open := hammer(ctx, e, hammers, o.overloadFor, o.overloadRate)
		samples, short := stopSampling()
		tp.release()
		outs := append(closed, open...)
		for range s.maxAdmitted {
			outs = append(outs, <-occupiers)
		}
		r.add(outs)
		if short > 0 {
			r.breach("%d of %d samples found lanes idle during the overload", short, samples)
		}
		overloadFigures(r, o, hammers, closed, open)
	})}
}

// sampleBusyLanes checks every 20 ms that the gateway runs lanes calls and the backend holds
// as many. The function it returns stops the sampling and says how many samples were taken
// and how many found a lane idle.
func sampleBusyLanes(e *env, tp *tap, lanes int) (stop func() (samples, short int64)) {
	done := make(chan struct{})
	var samples, short atomic.Int64
	sampled := make(chan struct{})
	go func() { // exits when done closes
		defer close(sampled)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			st := e.local.app.Gateway.State()
			samples.Add(1)
			if st.Running != lanes || tp.held.Load() != int64(lanes) {
				short.Add(1)
			}
		}
	}()
	return func() (int64, int64) {
		close(done)
		<-sampled
		return samples.Load(), short.Load()
	}
}

// overloadFigures records the 429s' rate and latency in both phases and holds them to the
// targets.
func overloadFigures(r *result, o runOpts, hammers int, closed, open []outcome) {
	capacity := summarize(rejectLatencies(closed))
	at := summarize(rejectLatencies(open))
	capRate := float64(capacity.N) / o.overloadFor.Seconds()
	rate := float64(at.N) / o.overloadFor.Seconds()
	r.Figures["hammer_clients"] = float64(hammers)
	r.Figures["closed_loop_429_per_s"] = capRate
	r.Figures["closed_loop_429_p50_ms"], r.Figures["closed_loop_429_p99_ms"] = capacity.P50, capacity.P99
	r.Figures["open_loop_offered_per_s"] = o.overloadRate
	r.Figures["open_loop_429_per_s"] = rate
	r.Figures["open_loop_429_p50_ms"], r.Figures["open_loop_429_p99_ms"] = at.P50, at.P99
	r.target("429s per second (closed loop)", capRate, "≥ 10000", capRate >= 10000)
	r.target("429 p50 ms at the offered rate", at.P50, "< 1", at.P50 < 1)
	r.target("429 p99 ms at the offered rate", at.P99, "< 5", at.P99 < 5)
}

// rejectLatencies returns the latencies of the well-formed 429s among outs.
func rejectLatencies(outs []outcome) []float64 {
	var lat []float64
	for _, o := range outs {
		if o.status == 429 && o.breach == "" {
			lat = append(lat, ms(o.total))
		}
	}
	return lat
}

// hammer runs n clients for d and returns every outcome. With rate 0 each client sends its
// next call as soon as the last is answered; otherwise each sends on its own schedule of
// rate/n calls per second, and an outcome's total time counts from when the call was due.
func hammer(ctx context.Context, e *env, n int, d time.Duration, rate float64) []outcome {
	start := time.Now()
	end := start.Add(d)
	var every time.Duration
	if rate > 0 {
		every = time.Duration(float64(n) / rate * float64(time.Second))
	}
	var mu sync.Mutex
	var all []outcome
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { // exits at the end of the window
			defer wg.Done()
			var mine []outcome
			c := call{model: "slow/m", hold: true, tag: "hammer"}
			c.payload = c.body() // the clients share the CPU with the gateway: spend little
			// Clients start spread over one interval so the schedule is smooth.
			due := start.Add(time.Duration(i) * every / time.Duration(n))
			for due.Before(end) && ctx.Err() == nil {
				if every > 0 {
					if wait := time.Until(due); wait > 0 {
						t := time.NewTimer(wait)
						select {
						case <-t.C:
						case <-ctx.Done():
							t.Stop()
						}
					}
				}
				o := send(ctx, e.client, e.base, c)
				if every > 0 {
					o.total = time.Since(due)
					due = due.Add(every)
				} else {
					due = time.Now()
				}
				mine = append(mine, o)
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return all
}
