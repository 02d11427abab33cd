package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/tollgate/tollgate/cmd/internal/fakellm"
)

// The forbidden-model scenario (SPEC §10): a 403 for one model sets aside only that model's
// (key, model) pairs, never the keys. One provider with two keys and two models, the
// backend refusing every call to one of them with its 403 for a model the key may not use;
// 300 clients call both at random. Every call to the other model is served, on both keys;
// every call to the refused one is 502 upstream_auth_failed, and the backend sees at most
// one of them per key beyond those already running when the first refusals came back (then
// the pairs are set aside, re-probed only after max_key_cooldown, longer than the run).
func init() {
	scenarios = append(scenarios, scenario{name: "forbidden-model", localOnly: true,
		about: "300 clients on two models of one provider with two keys, the backend refusing one model with 403: the other model's calls are all served on both keys, the refused one's answered 502 after at most one backend call per key",
		run:   forbiddenModel})
}

const (
	fmClients  = 300
	fmSpread   = 400 * time.Millisecond
	fmProvider = "shared"
	fmLanes    = 8
)

var fmKeys = []string{"fm-key-a", "fm-key-b"}

func forbiddenModel(ctx context.Context, o runOpts) []*result {
	s := setup{name: "one model refused 403, one allowed", maxRunning: fmLanes, maxAdmitted: fmClients,
		providers: []provider{{name: fmProvider, keys: fmKeys, lanes: fmLanes, queueLength: fmClients, queueTimeout: 30 * time.Second,
			backend: fakellm.Options{Latency: 5 * time.Millisecond, Chunks: 4, ChunkInterval: 2 * time.Millisecond},
			models:  []model{{"allowed", fmLanes}, {"denied", fmLanes}}}}}
	return []*result{runLocal(ctx, "forbidden-model", s, fmClients, func(e *env, r *result) {
		b := e.local.backends[0]
		mustScript(r, b.fake, fakellm.Script{Models: map[string]fakellm.ModelScript{"denied": {Mode: "forbidden"}}})
		rng := rand.New(rand.NewPCG(o.seed, 26))
		calls := make([]call, fmClients)
		arrive := make([]time.Duration, fmClients)
		for i := range calls {
			m := []string{"allowed", "denied"}[rng.IntN(2)]
			calls[i] = call{model: fmProvider + "/" + m, stream: rng.IntN(2) == 0, tag: fmt.Sprintf("f%d", i)}
			arrive[i] = time.Duration(rng.Int64N(int64(fmSpread)))
		}
		outs := fire(ctx, e, calls, func(i int) (time.Duration, time.Duration) { return arrive[i], 0 })
		fmCheck(e, r, outs)
	})}
}

// fmCheck: the allowed model served every call, the denied one answered each 502
// upstream_auth_failed, the backend saw at most one denied call per key and a lane's worth
// in flight, and /admin/state
// shows both keys ready, each set aside for the denied model alone.
func fmCheck(e *env, r *result, outs []outcome) {
	allowed, denied := 0, 0
	for i := range outs {
		switch o := &outs[i]; {
		case o.call.model == fmProvider+"/allowed":
			allowed++
			if o.status != 200 {
				r.breach("a call to the allowed model was answered %d %s: the refused model touched it", o.status, o.code)
			}
		case o.status == 502 && o.code == "upstream_auth_failed":
			denied++
			o.breach = "" // the refused model's honest answer
		default:
			r.breach("a call to the refused model was answered %d %s, want 502 upstream_auth_failed", o.status, o.code)
		}
	}
	r.add(outs)
	st := e.local.backends[0].fake.Stats()
	r.Figures["allowed_calls"], r.Figures["denied_calls"] = float64(allowed), float64(denied)
	r.Figures["backend_denied_calls"] = float64(st.Requests) - float64(allowed)
	if bound := allowed + len(fmKeys) + fmLanes; st.Requests > int64(bound) {
		r.breach("the backend saw %d calls for %d allowed ones: refused calls beyond one per key (%d) and the %d lanes in flight",
			st.Requests, allowed, len(fmKeys), fmLanes)
	}
	if allowed == 0 || denied == 0 {
		r.breach("the scenario did not call both models: %d allowed, %d refused", allowed, denied)
	}
	p := providerState(e.local.app.Gateway.State(), fmProvider)
	if p == nil || len(p.Keys) != len(fmKeys) {
		r.breach("no state of %s's %d keys: %+v", fmProvider, len(fmKeys), p)
		return
	}
	for _, k := range p.Keys {
		var models []string
		for _, m := range k.Models {
			models = append(models, m.Name)
		}
		if k.State != "ready" || !slices.Equal(models, []string{fmProvider + "/denied"}) {
			r.breach("key %d: %s, set aside for %v; want ready, set aside for %s/denied alone", k.Index, k.State, models, fmProvider)
		}
	}
}
