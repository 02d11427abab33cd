package policy

import (
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// ProviderState is one provider's lanes and queue, for /admin/state (SPEC §7). The HTTP
// layer adds kinds and ids.
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

// Snapshot copies the provider's counts into a new ProviderState.
func (p *Provider) Snapshot() ProviderState {
	ps := ProviderState{
		Name: p.name, Lanes: p.lanes, EffectiveLanes: p.eff,
		Running: p.running, Queued: p.queued, QueueLength: p.queueLength,
		Models: make([]ModelState, len(p.models)),
	}
	for i := range p.models {
		md := &p.models[i]
		ps.Models[i] = ModelState{Name: md.name, ModelLanes: md.lanes, Running: md.running, Queued: md.queued}
	}
	return ps
}

// Info describes one request the provider knows.
type Info struct {
	Model    int // index as given to Arrive
	Priority llm.Priority
	Running  bool
	Arrived  time.Time // when Arrive saw it
	Started  time.Time // zero while it waits
	Deadline time.Time // when it expires if it is still queued
}

// Lookup returns what the provider knows about id; ok is false for an unknown id.
func (p *Provider) Lookup(id ID) (Info, bool) {
	e, ok := p.index[id]
	if !ok {
		return Info{}, false
	}
	en := &p.entries[e]
	in := Info{
		Model: int(en.m), Priority: llm.Priority(en.class), Running: en.state == running,
		Arrived: en.arrived, Deadline: en.deadline,
	}
	if in.Running {
		in.Started = en.started
	}
	return in, true
}

// Blocker is what holds back a provider's queued requests for one model.
type Blocker uint8

const (
	// BlockedElsewhere: nothing of the provider's; the gateway's max_running does.
	BlockedElsewhere    Blocker = iota
	BlockedByLanes              // every (effective) lane of the provider is busy
	BlockedByModelLanes         // every model lane of the model is busy
	BlockedByRateLimit          // the rate limiter has no token now
	BlockedByQueue              // waiting requests come first (Reserve: a batch never passes them)
)

// Blocker says what holds back requests for model m at now, checked in SPEC §2's order.
func (p *Provider) Blocker(m int, now time.Time) Blocker {
	switch {
	case p.running >= p.eff:
		return BlockedByLanes
	case m >= 0 && m < len(p.models) && p.models[m].running >= p.models[m].lanes:
		return BlockedByModelLanes
	case p.bucket.tokens(now, 1) == 0:
		return BlockedByRateLimit
	}
	return BlockedElsewhere
}
