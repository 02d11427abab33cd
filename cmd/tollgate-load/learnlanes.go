package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tollgate/tollgate/cmd/internal/fakellm"
)

// The learn-lanes scenario (SPEC §11): a provider configured for 8 lanes whose
// backend takes 3 at once and says so in its 429s. A burst of 50 teaches the gateway the 3;
// then the backend's limit rises to 6 and steady load finds it again.
const (
	llConfigured = 8
	llHidden     = 3
	llRaised     = 6
	llBurst      = 50
	// llClients keep the lanes full while the gateway probes upwards: more than the raised
	// limit, so every probe runs with all its effective lanes busy.
	llClients = 12
	// llMaxCalls bounds the recovery from 3 to 6: three probes of lanes_probe (20) successes,
	// with room for the refused probes above the ceiling and their doubled waits.
	llMaxCalls = 400
	// llSettle calls more are made once lanes reached the raised limit, to see them hold there
	// (a probe above it is refused and undone).
	llSettle = 100
)

// learnSetup's calls take about 80 ms at the backend. The gateway counts a lane busy from
// its grant until its release is processed, a few milliseconds either side of the call the
// backend sees, and more under -race on a loaded machine: with calls as short as those
// margins, 7 lanes can read all busy (a probe's successes) while the backend never holds
// more than its 6, so the probes climb to 8 unrefused.
// Calls long beside the gateway's own bookkeeping, as real LLM calls are, keep a probe
// above the limit a call the backend sees and refuses.
func learnSetup() setup {
	b := fakellm.Options{Latency: 60 * time.Millisecond, Chunks: 4, ChunkInterval: 5 * time.Millisecond,
		MaxConcurrent: llHidden, BusyStyle: fakellm.BusyStated}
	return setup{name: "8 lanes configured, the backend takes 3", maxRunning: 64, maxAdmitted: 128, providers: []provider{
		{name: "hidden", lanes: llConfigured, queueLength: 64, queueTimeout: time.Minute, backend: b,
			models: []model{{"m", llConfigured}}},
	}}
}

func learnLanes(ctx context.Context, o runOpts) []*result {
	return []*result{runLocal(ctx, "learn-lanes", learnSetup(), llBurst+llClients, func(e *env, r *result) {
		e.refusals = true
		b := e.local.backends[0]
		e.local.meter.keepSpans()
		calls := make([]call, llBurst)
		for i := range calls {
			calls[i] = call{model: "hidden/m", stream: i%2 == 0, tag: fmt.Sprintf("l%d", i)}
		}
		outs := fire(ctx, e, calls, nil)
		learned := learnedAfter(r, b.tap.refusals(), e.local.meter.calls(), llHidden)
		for i := range outs { // the gateway's own clean 429s are fine; the backend's are not
			if outs[i].code == "upstream_rate_limited" {
				r.breach("call %s was answered upstream_rate_limited: a capacity refusal reached the client", outs[i].call.tag)
			}
		}
		r.add(outs)
		if !learned {
			return
		}
		if p := providerState(e.local.app.Gateway.State(), "hidden"); p == nil || p.EffectiveLanes != llHidden {
			r.breach("effective_lanes after the burst: %+v, want %d", p, llHidden)
		} else {
			r.Figures["effective_lanes_after_burst"] = float64(p.EffectiveLanes)
		}
		if err := b.fake.SetLimit(llRaised, ""); err != nil {
			r.breach("raise the limit: %v", err)
			return
		}
		recoverLanes(ctx, e, r)
	})}
}

// learnedAfter checks the first invariant: once the calls in flight at the backend's first
// refusal have ended, the gateway never holds more than limit calls to it. It returns whether
// the backend refused at all (without a refusal there was nothing to learn: a breach).
func learnedAfter(r *result, refused []time.Time, spans []span, limit int) bool {
	if len(refused) == 0 {
		r.breach("the backend never refused a call: the burst did not reach its hidden limit")
		return false
	}
	first := refused[0]
	settled := first // when the last call in flight at the first refusal ended
	for _, s := range spans {
		if !s.start.After(first) && s.end.After(settled) {
			settled = s.end
		}
	}
	peak := peakAfter(spans, settled)
	r.Figures["first_refusal_to_settled_ms"] = ms(settled.Sub(first))
	r.Figures["max_concurrent_after_learning"] = float64(peak)
	r.Figures["refusals"] = float64(len(refused))
	if peak > limit {
		r.breach("the backend saw %d concurrent calls after the learning point; its limit is %d", peak, limit)
	}
	return true
}

// peakAfter is the most spans open at once among those that started after t.
func peakAfter(spans []span, t time.Time) int {
	type edge struct {
		at time.Time
		d  int
	}
	var edges []edge
	for _, s := range spans {
		if s.start.After(t) {
			edges = append(edges, edge{s.start, 1}, edge{s.end, -1})
		}
	}
	sort.Slice(edges, func(i, j int) bool { // an end before a start at the same instant
		if edges[i].at.Equal(edges[j].at) {
			return edges[i].d < edges[j].d
		}
		return edges[i].at.Before(edges[j].at)
	})
	n, peak := 0, 0
	for _, e := range edges {
		n += e.d
		peak = max(peak, n)
	}
	return peak
}

// recoverLanes keeps llClients calling until effective lanes reach llRaised (and llSettle
// calls more) or llMaxCalls were made, sampling effective lanes after every call: they must
// climb to llRaised within the bound and never read above it by more than the one lane a
// probe adds.
func recoverLanes(ctx context.Context, e *env, r *result) {
	g := e.local.app.Gateway
	var mu sync.Mutex
	made, peak, reached := 0, 0, -1
	var bad []string
	var outs []outcome
	var wg sync.WaitGroup
	for c := range llClients {
		wg.Go(func() { // exits once lanes reached the raised limit and settled, or the calls ran out
			for n := 0; ctx.Err() == nil; n++ {
				mu.Lock()
				done := made >= llMaxCalls+llSettle || reached < 0 && made >= llMaxCalls || reached >= 0 && made >= reached+llSettle
				made++
				mu.Unlock()
				if done {
					return
				}
				o := send(ctx, e.client, e.base, call{model: "hidden/m", tag: fmt.Sprintf("r%dn%d", c, n)})
				p := providerState(g.State(), "hidden")
				mu.Lock()
				outs = append(outs, o)
				if !ok(o) {
					bad = append(bad, fmt.Sprintf("%d %s", o.status, o.code))
				}
				if p != nil {
					peak = max(peak, p.EffectiveLanes)
					if p.EffectiveLanes >= llRaised && reached < 0 {
						reached = made
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	r.add(outs)
	r.Figures["calls_to_relearn"], r.Figures["effective_lanes_peak"] = float64(reached), float64(peak)
	if reached < 0 {
		r.breach("effective lanes did not reach %d within %d calls after the limit was raised (peak %d)", llRaised, llMaxCalls, peak)
	}
	if peak > llRaised+1 {
		r.breach("effective lanes read %d after the limit rose to %d: more than one probe above it", peak, llRaised)
	}
	if len(bad) > 0 {
		r.breach("%d calls failed while the gateway relearned: %s", len(bad), strings.Join(bad[:min(len(bad), 5)], ", "))
	}
}
