//go:build tollgate_faults

package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/tollgate/tollgate/actors"
)

// The actor-faults scenario exists only in builds with the tollgate_faults tag (make
// loadtest and make test build it so): production binaries cannot inject panics.
func init() {
	scenarios = append(scenarios, scenario{name: "actor-faults", localOnly: true,
		about: "panics injected into each actor kind, once and repeatedly, under load with hang-ups: every client answered or cleanly refused, caps kept, idle and goroutines at baseline afterwards",
		run:   actorFaults})
}

// faultCase is one injection: which fault, and what must be true afterwards.
type faultCase struct {
	name  string
	fault actors.Fault
	// outOfService: a repeating fault must take its provider out of service (the budget
	// stops the loop); gatewayFails: a repeating fault in the supervisor fails the gateway.
	outOfService, gatewayFails bool
	// early: armed before the load starts, not at faultAt. Its fault cannot fail the
	// gateway, and the messages it fires on come only from calls running when their client
	// hangs up, which the random load may not have (its hang-ups mostly find their calls
	// queued, and on a loaded machine every one may): so its load begins with sureHangUps
	// streaming calls to a model with lanes free, each hanging up in the middle of its
	// answer.
	early bool
}

var faultCases = []faultCase{
	{name: "provider/arrive", fault: actors.Fault{Actor: "provider", Provider: "alpha", On: "arrive"}},
	{name: "provider/grants", fault: actors.Fault{Actor: "provider", Provider: "beta", On: "grants"}},
	{name: "provider/freed", fault: actors.Fault{Actor: "provider", Provider: "gamma", On: "freed"}},
	{name: "lane/startCall", fault: actors.Fault{Actor: "lane", Provider: "alpha", On: "startCall"}},
	{name: "lane/released", fault: actors.Fault{Actor: "lane", Provider: "beta", On: "released"}},
	{name: "request/clientGone", fault: actors.Fault{Actor: "request", On: "clientGone", Times: 3}, early: true},
	{name: "supervisor/offer", fault: actors.Fault{Actor: "supervisor", On: "offer"}},
	{name: "supervisor/dispatchNow", fault: actors.Fault{Actor: "supervisor", On: "dispatchNow"}},
	{name: "provider/repeating", fault: actors.Fault{Actor: "provider", Provider: "gamma", Times: -1}, outOfService: true},
	{name: "lane/repeating", fault: actors.Fault{Actor: "lane", Provider: "beta", Times: -1}, outOfService: true},
	{name: "supervisor/repeating", fault: actors.Fault{Actor: "supervisor", Times: -1}, gatewayFails: true},
}

const (
	faultClients = 120
	faultSpread  = 600 * time.Millisecond // arrivals spread over this
	faultAt      = 150 * time.Millisecond // the fault is armed this far into the load
)

func actorFaults(ctx context.Context, o runOpts) []*result {
	var out []*result
	for i, fc := range faultCases {
		r := runLocal(ctx, "actor-faults "+fc.name, multi(6, 32, slowAnswer), faultClients, func(e *env, r *result) {
			faultLoad(ctx, e, r, fc, o.seed+uint64(i))
		})
		out = append(out, r)
	}
	return out
}

func faultLoad(ctx context.Context, e *env, r *result, fc faultCase, seed uint64) {
	e.hangUps = true
	g := e.local.app.Gateway
	calls, arrive, hangUp := faultCalls(e, seed, fc.early)
	armed := armFault(ctx, g, fc)
	outs := fire(ctx, e, calls, func(i int) (time.Duration, time.Duration) { return arrive[i], hangUp[i] })
	if err := <-armed; err != nil {
		r.breach("inject: %v", err)
		return
	}
	g.ClearFaults() // what did not fire yet must not fire during the idle checks
	clean := 0
	for i := range outs {
		if cleanFault(&outs[i], fc) {
			clean++
		}
	}
	r.add(outs)
	fired := g.FaultsFired()
	r.Figures["faults_fired"] = float64(fired)
	r.Figures["clean_fault_answers"] = float64(clean)
	if fired == 0 {
		r.breach("the fault never fired: the case proved nothing")
	}
	if ok := count(outs, ok); ok == 0 {
		r.breach("no call succeeded")
	}
	st, _ := e.state(ctx)
	checkAfterFault(r, st, g, fc, fired)
}

// faultCalls draws the case's load: each call's model and mode, when it arrives, and for a
// quarter of them when its client hangs up (0: never), some while queued, some streaming.
// With sure set, the first sureHangUps calls are streams to one model, sent at once and
// hung up in the middle of their answers.
func faultCalls(e *env, seed uint64, sure bool) (calls []call, arrive, hangUp []time.Duration) {
	rng := rand.New(rand.NewPCG(seed, 7))
	ids := e.models(runOpts{})
	calls = make([]call, faultClients)
	arrive, hangUp = make([]time.Duration, faultClients), make([]time.Duration, faultClients)
	for i := range calls {
		calls[i] = call{model: ids[rng.IntN(len(ids))], stream: rng.IntN(2) == 0, tag: fmt.Sprintf("f%d", i)}
		arrive[i] = time.Duration(rng.Int64N(int64(faultSpread)))
		if rng.IntN(4) == 0 {
			hangUp[i] = 5*time.Millisecond + time.Duration(rng.Int64N(int64(80*time.Millisecond)))
		}
		if sure && i < sureHangUps {
			calls[i].model, calls[i].stream = ids[0], true // alpha/a1: its model lanes take all three
			arrive[i], hangUp[i] = 0, sureHangUpAt
		}
	}
	return calls, arrive, hangUp
}

// sureHangUps streaming calls hang up sureHangUpAt after they were sent, in the middle of
// slowAnswer's 200 ms answer: long after a call with lanes free has started, even on a
// loaded machine, and long before it ends.
const (
	sureHangUps  = 3
	sureHangUpAt = 100 * time.Millisecond
)

// armFault injects fc's fault, at once for an early case, else at faultAt into the load once
// a call runs; the channel it returns receives the injection's error, or ctx's.
func armFault(ctx context.Context, g *actors.Gateway, fc faultCase) <-chan error {
	armed := make(chan error, 1)
	if fc.early {
		armed <- g.InjectFault(fc.fault)
		return armed
	}
	go func() { // exits once the fault is armed
		t := time.NewTimer(faultAt)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			armed <- ctx.Err()
			return
		}
		// Not before a call runs: on a loaded machine the first calls may not have started
		// by faultAt, and a fault that fails the gateway then leaves no call to succeed.
		for g.State().Running == 0 {
			select {
			case <-ctx.Done():
				armed <- ctx.Err()
				return
			case <-time.After(time.Millisecond): // polling, bounded by ctx
			}
		}
		armed <- g.InjectFault(fc.fault)
	}()
	return armed
}

// checkAfterFault holds the gateway's state after the load to what fc's fault must leave: its
// provider out of service, the gateway failed, or, for a single fault, every provider ok.
// A repeating fault's panics are stopped by the restart budget: a handful, not one a message.
func checkAfterFault(r *result, st stateDoc, g *actors.Gateway, fc faultCase, fired int) {
	switch {
	case fc.outOfService:
		p := providerState(st, fc.fault.Provider)
		if p == nil || p.State != "out_of_service" {
			r.breach("a repeating fault did not take %s out of service: %+v", fc.fault.Provider, p)
		}
		if fired > 20 {
			r.breach("%d panics: the restart budget did not stop the loop", fired)
		}
		for _, pv := range st.Providers {
			if pv.Name != fc.fault.Provider && pv.State != "ok" {
				r.breach("provider %s is %s: a fault elsewhere spread", pv.Name, pv.State)
			}
		}
	case fc.gatewayFails:
		if g.Failed() == nil {
			r.breach("a repeating supervisor fault did not fail the gateway")
		}
		if fired > 20 {
			r.breach("%d panics: the restart budget did not stop the loop", fired)
		}
	default:
		for _, pv := range st.Providers {
			if pv.State != "ok" {
				r.breach("a single fault left provider %s %s", pv.Name, pv.State)
			}
		}
	}
}

// cleanFault accepts, in place of a success or a 429, the answers supervision gives: a 503
// for a call lost in a crash or refused by a provider out of service, a 503 gateway_draining
// once the gateway failed, or such an error ending a stream that had started. It clears the
// outcome's breach when the answer is one of those, and reports whether it was.
func cleanFault(o *outcome, fc faultCase) bool {
	if o.breach == "" || o.cancelled {
		return false
	}
	allowed := []string{"provider_unavailable"}
	if fc.gatewayFails {
		allowed = append(allowed, "gateway_draining")
	}
	if fc.fault.Actor == "request" {
		allowed = append(allowed, "upstream_error")
	}
	for _, code := range allowed {
		if o.code == code && (o.status == 503 || o.status == 502) ||
			o.status == 200 && strings.HasPrefix(o.breach, "stream ended with an error event ("+code+")") {
			o.breach = ""
			return true
		}
	}
	return false
}
