package policy

import (
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// State is the gate's part of /admin/state (SPEC §7). The HTTP layer adds kinds and ids.
type State struct {
	Running     int
	Queued      int
	MaxRunning  int
	MaxAdmitted int
	Providers   []ProviderState
}

// ProviderState is one provider's lanes and queue.
type ProviderState struct {
	Name           string
	Lanes          int
	EffectiveLanes int
	Running        int
	Queued         int
	QueueLength    int
	Models         []ModelState
}

// ModelState is one model's lanes and queue.
type ModelState struct {
	Name       string
	ModelLanes int
	Running    int
	Queued     int
}

// Snapshot copies the counts into a new State. Held requests (see Arrive) count as running.
func (g *Gate) Snapshot() State {
	s := State{
		Running: g.running, Queued: g.queued,
		MaxRunning: g.limits.MaxRunning, MaxAdmitted: g.limits.MaxAdmitted,
		Providers: make([]ProviderState, len(g.providers)),
	}
	for i := range g.providers {
		pr := &g.providers[i]
		ps := ProviderState{
			Name: pr.name, Lanes: pr.lanes, EffectiveLanes: pr.eff,
			Running: pr.running, Queued: pr.queued, QueueLength: pr.queueLength,
			Models: make([]ModelState, pr.n),
		}
		for j := range pr.n {
			md := &g.models[pr.first+j]
			ps.Models[j] = ModelState{Name: md.name, ModelLanes: md.lanes, Running: md.running, Queued: md.queued}
		}
		s.Providers[i] = ps
	}
	return s
}

// Info describes one request the gate knows.
type Info struct {
	Provider, Model int // indexes as given to Arrive
	Priority        llm.Priority
	Running         bool      // started (and reported by Dispatch or Arrive)
	Arrived         time.Time // when Arrive saw it
	Started         time.Time // zero while it waits
	Deadline        time.Time // when it expires if it is still queued
}

// Lookup returns what the gate knows about id; ok is false for an unknown id. A held
// request (see Arrive) is reported as still queued.
func (g *Gate) Lookup(id ID) (Info, bool) {
	e, ok := g.index[id]
	if !ok {
		return Info{}, false
	}
	en := &g.entries[e]
	in := Info{
		Provider: int(en.p), Model: int(en.m) - g.providers[en.p].first,
		Priority: llm.Priority(en.class), Running: en.state == running,
		Arrived: en.arrived, Deadline: en.deadline,
	}
	if in.Running {
		in.Started = en.started
	}
	return in, true
}
