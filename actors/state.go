package actors

import (
	"time"

	"github.com/tollgate/tollgate/actors/policy"
)

// AdminState is the /admin/state document (SPEC §7).
type AdminState struct {
	Running     int             `json:"running"`
	Queued      int             `json:"queued"`
	MaxRunning  int             `json:"max_running"`
	MaxAdmitted int             `json:"max_admitted"`
	Providers   []ProviderState `json:"providers"`
}

// ProviderState is one provider's lanes and queue.
type ProviderState struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// State is "ok"; "out_of_service" once its actors failed past their restart budget;
	// "unavailable" when it did not answer in time (it is rebuilding after a crash).
	State          string       `json:"state"`
	Lanes          int          `json:"lanes"`
	EffectiveLanes int          `json:"effective_lanes"`
	Running        int          `json:"running"`
	Queued         int          `json:"queued"`
	QueueLength    int          `json:"queue_length"`
	Models         []ModelState `json:"models"`
}

// ModelState is one model's lanes.
type ModelState struct {
	ID         string `json:"id"`
	ModelLanes int    `json:"model_lanes"`
	Running    int    `json:"running"`
	Queued     int    `json:"queued"`
}

// providerState renders provider p's policy state for /admin/state.
func providerState(g *Gateway, p int, pol *policy.Provider, failed bool) ProviderState {
	pv := &g.opts.Providers[p]
	snap := pol.Snapshot()
	ps := ProviderState{Name: pv.Name, Kind: pv.Kind, State: "ok", Lanes: snap.Lanes, EffectiveLanes: snap.EffectiveLanes,
		Running: snap.Running, Queued: snap.Queued, QueueLength: snap.QueueLength, Models: make([]ModelState, len(snap.Models))}
	if failed {
		ps.State, ps.EffectiveLanes = "out_of_service", 0
	}
	for j, m := range snap.Models {
		ps.Models[j] = ModelState{ID: pv.Name + "/" + m.Name, ModelLanes: m.ModelLanes, Running: m.Running, Queued: m.Queued}
	}
	return ps
}

// stateTimeout bounds State's wait for the provider actors, which answer at once unless one
// is rebuilding after a crash or the actors are gone.
const stateTimeout = 2 * time.Second

// State returns a snapshot of lanes and queues: each provider's part taken by its own actor
// between two of its messages, the totals summed from them. It never blocks for long: after
// Shutdown it returns at once, and a provider that does not answer within stateTimeout is
// shown as "unavailable".
func (g *Gateway) State() AdminState {
	st := AdminState{MaxRunning: g.opts.MaxRunning, MaxAdmitted: g.opts.MaxAdmitted,
		Providers: make([]ProviderState, len(g.opts.Providers))}
	for i, pv := range g.opts.Providers {
		st.Providers[i] = ProviderState{Name: pv.Name, Kind: pv.Kind, State: "unavailable", Lanes: pv.Lanes,
			QueueLength: pv.QueueLength, Models: []ModelState{}}
	}
	select {
	case <-g.stopped:
		return st
	default:
	}
	reply := make(chan statePart, len(g.providers))
	for _, pid := range g.providers {
		g.system.Root.Send(pid, &stateQuery{reply: reply})
	}
	timeout := time.NewTimer(stateTimeout)
	defer timeout.Stop()
	for range g.providers {
		select {
		case part := <-reply:
			if part.p >= 0 && part.p < len(st.Providers) {
				st.Providers[part.p] = part.provider
			}
		case <-timeout.C:
			return st.total()
		case <-g.stopped:
			return st.total()
		}
	}
	return st.total()
}

func (st AdminState) total() AdminState {
	st.Running, st.Queued = 0, 0
	for _, p := range st.Providers {
		st.Running += p.Running
		st.Queued += p.Queued
	}
	return st
}
