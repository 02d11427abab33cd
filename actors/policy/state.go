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
	// AwaitingVerdict are the queued requests the dispatcher has not yet judged against
	// max_admitted (the grant protocol admits them provisionally); it may refuse them yet.
	AwaitingVerdict int
	QueueLength     int
	Models          []ModelState
	// Clients are the running and queued requests of each client that has some (SPEC §18),
	// by name ("" the anonymous client).
	Clients map[string]ClientCounts
}

// ModelState is one model's lanes and queue.
type ModelState struct {
	Name       string
	ModelLanes int
	// EffectiveModelLanes is below ModelLanes while the gateway has learned that the model
	// takes fewer (a model with keys of its own learns its own).
	EffectiveModelLanes int
	Running             int
	Queued              int
}

// Snapshot copies the provider's counts into a new ProviderState.
func (p *Provider) Snapshot() ProviderState {
	l := &p.lanes
	ps := ProviderState{
		Name: p.name, Lanes: l.lanes, EffectiveLanes: l.eff,
		Running: l.running, Queued: p.q.n, AwaitingVerdict: p.q.n - p.q.confirmed, QueueLength: p.queueLength,
		Models: make([]ModelState, len(p.models)), Clients: p.q.byClient(),
	}
	for i, name := range p.models {
		md := &l.models[i]
		ps.Models[i] = ModelState{Name: name, ModelLanes: md.lanes, EffectiveModelLanes: md.eff,
			Running: md.running, Queued: queuedIn(p.q.byModel[i])}
	}
	return ps
}

// Info describes one request the provider knows.
type Info struct {
	Model    int // index as given to Arrive
	Priority llm.Priority
	Running  bool
	Arrived  time.Time  // its place in the FIFO: when it first came
	Started  time.Time  // zero while it waits
	Deadline time.Time  // when it expires if it is still queued
	Tokens   int        // its estimated cost
	Key      int        // running: the key of its last attempt
	Client   llm.Client // who it is for: the name, share (weight, at least 1) and max_running it was queued with
}

// Lookup returns what the provider knows about id; ok is false for an unknown id.
func (p *Provider) Lookup(id ID) (Info, bool) {
	e, ok := p.q.index[id]
	if !ok {
		return Info{}, false
	}
	en := &p.q.entries[e]
	in := Info{
		Model: int(en.m), Priority: llm.Priority(en.class), Running: en.state == running,
		Arrived: en.arrived, Deadline: en.deadline, Tokens: en.cost,
		Client: llm.Client{Name: p.q.clients[en.client].name, Weight: p.q.clients[en.client].share,
			MaxRunning: p.q.clients[en.client].maxRun},
	}
	if in.Running {
		in.Started, in.Key = en.started, int(en.key)
	}
	return in, true
}

// Blocker is what holds back a provider's queued requests for one model.
type Blocker uint8

const (
	// BlockedElsewhere: nothing of the provider's; the gateway's max_running does.
	BlockedElsewhere    Blocker = iota
	BlockedByStartCap           // the start cap (the circuit breaker) lets nothing start
	BlockedByLanes              // every (effective) lane of the provider is busy
	BlockedByModelLanes         // every (effective) model lane of the model is busy
	BlockedByKeys               // no key of the model's pool is ready, or none has room
	BlockedByRateLimit          // the rate limiter has no room for the request
	BlockedByQueue              // waiting requests come first (Reserve: a batch never passes them)
	BlockedByCluster            // the replicas sharing its limits run them full (Block)
)

// Blocker says what holds back a request for model m estimated at tokens at now, checked in
// the order admission consults them: the lanes' (Lanes), then the limiters' (Limiters).
func (p *Provider) Blocker(m, tokens int, now time.Time) Blocker {
	if b := p.lanes.blocker(m); b != BlockedElsewhere || m < 0 || m >= len(p.models) {
		return b
	}
	return p.limits.blocker(m, tokens, now)
}

// queuedIn sums a model's queued requests over the classes.
func queuedIn(byClass [llm.NumPriorities]int) int {
	n := 0
	for _, k := range byClass {
		n += k
	}
	return n
}
