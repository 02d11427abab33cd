package actors

import (
	"context"
	"time"

	"github.com/tollgate/tollgate/actors/replicas"
	"github.com/tollgate/tollgate/providers/llm"
)

// What each owner of a call keeps of it, in its own map by the call's id (the call itself is
// written once, in Start: messages.go). The maps hold values, not pointers, so that a record
// costs no allocation of its own; each is written only by its owner's goroutine.

// wait is the provider actor's record of a call in its queue: a fact a rebuild needs.
type wait struct {
	c         *call
	entered   time.Time // when the provider saw it: its queue wait starts then
	deadline  time.Time // when it expires if still queued
	confirmed bool      // the dispatcher's verdict kept it waiting
	// probe: it is back from a start the replicas had no room for (unleased) still holding
	// the breaker's half-open probe, which its next start keeps.
	probe bool
}

// queueWait is how long the call has waited in this provider's queue by now.
func (w *wait) queueWait(now time.Time) time.Duration {
	if w.entered.IsZero() {
		return 0
	}
	return now.Sub(w.entered)
}

// placed is the call's place in its FIFO.
func (w *wait) placed() time.Time {
	if w.c.arrived.IsZero() {
		return w.entered
	}
	return w.c.arrived
}

// run is the provider actor's record of a call it started, until its lanes are freed: what
// its health needs of the start when the call's attempts fail and when it ends.
type run struct {
	c       *call
	started time.Time // when a grant (or its batch's reservation) started it
	key     int       // its first key
	probe   bool      // it is the breaker's half-open probe
	busy    bool      // it took the last effective lane
	// keyProbe says the current attempt is the probe of a key (or of the key for its model)
	// set aside after a refusal, on key probeKey (keys.Ring.Began): its ending is the key's
	// verdict.
	keyProbe bool
	probeKey int
	// recorded is the attempt of this start (1-based) whose failure the provider actor
	// recorded when the stream asked (retryAsk); 0 when none. An ending whose last attempt
	// it is has nothing more to say; one whose retryAsk was answered otherwise (a crash's
	// strategy, a rebuild) is recorded when the call is settled.
	recorded int
	// keyName is its key's shared name when the replicas share key_rate_limit (set at its
	// start and each retry, sharedbuckets.go).
	keyName string
}

// start is what a provider decided as it started a call, sent to its lane (startCall) and
// read by the lane and the stream, never written after: the queue wait it had, its key, the
// adapter and run_timeout in force (a reload may have replaced those the route had at Start;
// a queued call must not start on a replaced adapter while its errors mark the new key
// ring), and what its leases claim.
type start struct {
	started  time.Time
	wait     time.Duration // how long it waited in its provider's queue, until started
	deadline time.Time     // its queue deadline, which a capacity requeue keeps
	key      int
	backend  llm.Backend
	keyed    llm.KeyedBackend // backend's, when it has keys
	timeout  time.Duration    // run_timeout
	// shared is what its leases on the replicas' shared limits claim or hold; nil without
	// replicas, so that a start costs them nothing.
	shared *startShared
}

// startShared is the part of a start only several replicas need.
type startShared struct {
	// lanes are its provider's and its model's effective lanes when it was granted: what its
	// leases claim, so that lanes learned lower hold across the replicas too.
	lanes   [2]int
	keyName string // run.keyName at the start
	// A batch member's leases, taken by StartBatch before its batch was admitted, and the
	// shared buckets they charged (sharedbuckets.go).
	lease   replicas.Lease
	charged []replicas.Bucket
}

// leases is what s's leases claim or hold; zero without replicas.
func (s *start) leases() startShared {
	if s.shared == nil {
		return startShared{}
	}
	return *s.shared
}

// set fills in what the lane and the stream run started call r with: provider pv's adapter
// and run_timeout in force now (see start), its key, and its queue wait from entered.
func (s *start) set(pv *Provider, r *run, entered, deadline time.Time) {
	s.started, s.wait, s.deadline, s.key = r.started, r.started.Sub(entered), deadline, r.key
	s.backend, s.timeout = pv.Backend, pv.RunTimeout
	s.keyed, _ = pv.Backend.(llm.KeyedBackend)
}

// queueWait is how long the call waited for admission.
func (s *start) queueWait() time.Duration { return s.wait }

// entered is when the call's queue wait began.
func (s *start) entered() time.Time { return s.started.Add(-s.wait) }

// laneRun is the lane actor's record of a call it runs: what its provider started it with,
// its stream once it has one, and with several replicas its hold on their shared limits
// (lease, and the buckets it charged) and, while that is being asked for, how to cancel the
// asking.
type laneRun struct {
	c       *call
	run     *start // its startCall's
	s       *stream
	leasing context.CancelCauseFunc
	lease   replicas.Lease
	charged []replicas.Bucket
}

// queueWait is how long the call waited for admission; 0 for no record.
func (r *laneRun) queueWait() time.Duration {
	if r.run == nil {
		return 0
	}
	return r.run.queueWait()
}
