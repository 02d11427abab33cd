package actors

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/actors/policy"
	"github.com/tollgate/tollgate/providers/llm"
)

// call is one chat request, from Gateway.Start to its provider actor, and on to its model's
// lane actor when it starts. Exactly one admitResult is ever delivered on reply: answer
// decides which, once, whoever calls it (the provider while the call waits, the lane once it
// starts, a supervision strategy for a call lost in a crash), and every other owner drops
// what it holds for a call it finds answered.
type call struct {
	id    policy.ID
	ctx   context.Context // the client's; its end is the client hanging up
	req   *llm.Request    // Model already replaced by the backend's model name
	route route
	prio  llm.Priority
	reply chan admitResult // buffered: answer never blocks

	answered atomic.Bool

	// Set by the provider actor that owns the call while it waits.
	arrived   time.Time // when the provider saw it: its queue wait starts then
	started   time.Time // when a grant started it
	confirmed bool      // the dispatcher's verdict kept it waiting (a fact a rebuild needs)

	// s is the running call's stream, set and read by its lane actor only.
	s *stream
}

// answer delivers the call's one result; it reports false, delivering nothing, when the
// call was answered already.
func (c *call) answer(r admitResult) bool {
	if !c.answered.CompareAndSwap(false, true) {
		return false
	}
	c.reply <- r
	return true
}

// queueWait is how long the call has waited for admission by now (or until it started).
func (c *call) queueWait(now time.Time) time.Duration {
	if !c.started.IsZero() {
		return c.started.Sub(c.arrived)
	}
	if c.arrived.IsZero() {
		return 0
	}
	return now.Sub(c.arrived)
}

// admitResult answers a call: a running stream, or why not.
type admitResult struct {
	stream    *stream
	err       error
	queueWait time.Duration
}

// The messages the gateway's actors exchange. Each names who sends it to whom.

// arrive, from Gateway.Start to the call's provider actor: admit it.
type arrive struct{ c *call }

// withdraw, from Gateway.Start to the provider actor: the client left while waiting. The
// provider answers the call if it still waits; a started call is stopped by its request
// actor, which watches the client too.
type withdraw struct{ c *call }

// offer, from a provider actor to the supervisor: its latest policy.Offer.
type offer struct {
	p int
	o policy.Offer
}

// dispatchNow, from the supervisor to itself: offers came; dispatch once they are all in.
type dispatchNow struct{}

// grants, from the supervisor to a provider actor: the starts it is granted, the verdicts on
// its waiting arrivals and the acknowledgement of its last offer, from one dispatch.
type grants struct {
	g   []policy.Grant
	v   []policy.Verdict
	ack *policy.Ack
}

// resync, from a rebuilt supervisor to every provider actor: report afresh for generation sync.
type resync struct{ sync uint64 }

// resyncTick, from the supervisor's timer to itself: ask the providers that have not
// answered a resync yet again.
type resyncTick struct{ sync uint64 }

// wake, from a provider actor's timer to itself: a queue deadline or a token is due.
type wake struct{}

// startCall, from a provider actor to the lane actor of the call's model: run it.
type startCall struct{ c *call }

// abort, from a provider actor to a lane actor: a call whose start the lane lost in a crash
// was answered with an error; drop whatever the lane holds of it.
type abort struct{ c *call }

// released, from a stream to its lane actor: the backend has stopped, the lanes are free.
type released struct{ c *call }

// freed, from a lane actor to its provider actor: a call's lanes are free.
type freed struct{ c *call }

// reportRunning, from a provider actor rebuilding its state to each of its lane actors.
type reportRunning struct{}

// laneReport, from a lane actor to its provider actor: the calls running on the lane.
type laneReport struct {
	m     int
	calls []*call
}

// cancelAll, from a provider actor to its lane actors: stop every running call with cause.
type cancelAll struct{ cause error }

// clientGone, from a request's context watcher to its request actor: call c's client left.
type clientGone struct{ c *call }

// stateQuery, from Gateway.State to the supervisor and to each provider actor: answer your
// part of /admin/state on reply.
type stateQuery struct{ reply chan statePart }

// statePart is one actor's part of the /admin/state document.
type statePart struct {
	p        int // -1: the supervisor's
	provider ProviderState
}

// drainAll, from Gateway.Shutdown to the supervisor and on to every provider actor: answer
// every waiting call gateway_draining and stop every running one; each provider then
// reports idle once nothing of it runs.
type drainAll struct{}

// providerIdle, from a provider actor to the supervisor: after drain, nothing of it runs any more.
type providerIdle struct{ p int }

// failNow, from a supervision strategy to a provider actor whose restart budget is spent:
// leave service now (see providerActor.fail).
type failNow struct{}
