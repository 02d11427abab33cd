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
		stop := make(chan struct{})
		var samples, short atomic.Int64
		sampled := make(chan struct{})
		go func() { // exits when stop closes
			defer close(sampled)
			t := time.NewTicker(20 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
				}
				st := e.local.app.Gateway.State()
				samples.Add(1)
				if st.Running != s.maxRunning || tp.held.Load() != int64(s.maxRunning) {
					short.Add(1)
				}
			}
		}()
		outs := hammer(ctx, e, hammers, o.overloadFor)
		close(stop)
		<-sampled
		tp.release()
		for range s.maxAdmitted {
			outs = append(outs, <-occupiers)
		}
		r.add(outs)
		if n := short.Load(); n > 0 {
			r.breach("%d of %d samples found lanes idle during the overload", n, samples.Load())
		}
		var lat []float64
		for _, o := range outs {
			if o.status == 429 && o.breach == "" {
				lat = append(lat, ms(o.total))
			}
		}
		rej := summarize(lat)
		rate := float64(rej.N) / o.overloadFor.Seconds()
		r.Figures["rejections_per_s"] = rate
		r.Figures["reject_p50_ms"], r.Figures["reject_p99_ms"] = rej.P50, rej.P99
		r.Figures["hammer_clients"] = float64(hammers)
		r.target("429s per second", rate, "≥ 10000", rate >= 10000)
		r.target("429 latency p50 ms", rej.P50, "< 1", rej.P50 < 1)
		r.target("429 latency p99 ms", rej.P99, "< 5", rej.P99 < 5)
	})}
}

// hammer runs n clients that send calls back to back for d and returns every outcome.
func hammer(ctx context.Context, e *env, n int, d time.Duration) []outcome {
	end := time.Now().Add(d)
	var mu sync.Mutex
	var all []outcome
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() { // exits at the end of the window
			defer wg.Done()
			var mine []outcome
			for time.Now().Before(end) && ctx.Err() == nil {
				mine = append(mine, send(ctx, e.client, e.base, call{model: "slow/m", hold: true, tag: "hammer"}))
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return all
}
