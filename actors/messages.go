package actors

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tollgate/tollgate/actors/policy"
	"github.com/tollgate/tollgate/providers/llm"
)

// The messages the gateway's actors exchange. Each names who sends it to whom.

// call is one chat request, from Gateway.Start to the supervisor. It travels on to the
// provider and lane actors when it starts. Exactly one admitResult is ever sent on reply.
type call struct {
	id      policy.ID
	ctx     context.Context // the client's; its end is the client hanging up
	req     *llm.Request    // Model already replaced by the backend's model name
	route   route
	prio    llm.Priority
	arrived time.Time
	started time.Time // set by the supervisor when the call leaves the queue
	reply   chan admitResult
	// taken is set by the one actor that owns the call from its start on (its lane actor, or
	// the supervisor answering it at shutdown), so a call re-sent after a crash runs once.
	taken atomic.Bool
}

// admitResult answers a call: a running stream, or why not.
type admitResult struct {
	stream    *stream
	err       error
	queueWait time.Duration
}

// cancelCall, from Gateway.Start to the supervisor: the client left while waiting for its
// admission. The supervisor answers the call if it is still queued; a started call is
// stopped by its own request actor.
type cancelCall struct{ id policy.ID }

// release, from a stream's Close to the supervisor: the backend has stopped, give the lanes back.
type release struct{ id policy.ID }

// wake, from the supervisor's timer to itself: queue deadlines or a rate limiter are due.
type wake struct{}

// startCall, from the supervisor to a provider actor and on to a lane actor: run it now.
type startCall struct{ c *call }

// lanesReady, from a provider actor to the supervisor whenever it has spawned lanes: the
// supervisor then hands started calls to the lane directly, one hop shorter.
type lanesReady struct {
	p     int
	from  *actor.PID // the provider actor; a report from an incarnation since replaced is ignored
	lanes []*actor.PID
}

// clientGone, from a request's context watcher to its request actor.
type clientGone struct{}

// stateQuery, from Gateway.State to the supervisor: answer a snapshot on reply.
type stateQuery struct{ reply chan AdminState }

// Fault is injected into a provider or lane actor to prove supervision (tests, chaos drills):
// the actor that receives it panics.
type Fault struct {
	Provider string // provider name
	Model    string // backend model name; empty targets the provider actor itself
}

// panicNow, from Gateway.Inject to the targeted actor.
type panicNow struct{ model string }
