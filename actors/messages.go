package actors

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tollgate/tollgate/actors/policy"
	"github.com/tollgate/tollgate/actors/replicas"
	"github.com/tollgate/tollgate/providers/llm"
)

// call is one chat request's admission to one model: the request as Gateway.Start (or
// StartBatch, or a requeue's again) made it, written once before it is sent and never after,
// so every owner may read it. What each owner learns of the call it keeps in its own record,
// by the call's id: the provider actor its wait (wait) and its start (run), the lane actor
// its run (laneRun), the stream its attempts; what one tells another travels as values in
// the messages (start, ending). The one shared mutable bit is the answer latch: exactly one
// admitResult is ever delivered on reply, and answer decides which, once, whoever calls it
// (the provider while the call waits, the lane once it starts, a supervision strategy for a
// call lost in a crash); every other owner drops what it holds for a call it finds answered.
// A request that comes back (requeued after a capacity refusal) or moves on (a fallback) is
// a new call.
type call struct {
	id     policy.ID
	ctx    context.Context // the client's; its end is the client hanging up
	req    *llm.Request    // Model already replaced by the backend's model name
	route  route
	prio   llm.Priority
	client llm.Client       // who it is for (SPEC §18)
	reply  chan admitResult // buffered: answer never blocks

	answered atomic.Bool

	tokens    int           // estimated cost for the tpm buckets; 0 when none counts tokens
	arrived   time.Time     // its place in the FIFO: when the request first came; zero: when it enters
	deadline  time.Time     // a requeue's: its first arrival's queue deadline, kept; zero: set as it enters
	requeueOf *prior        // the running call it replaces after a capacity refusal, or nil
	attempts  int           // backend attempts made on this model before this call (requeues)
	requeues  int           // capacity requeues before this call
	batch     bool          // a batch member: it starts with its batch or not at all, never requeued
	bound     int           // 1 + the key its conversation is bound to at this provider; 0 none (policy.Arrival.Bound)
	keyWait   time.Duration // how long it waited for its client key's own tokens: its queue_timeout counts it
	keyTokens int           // what its key's tpm bucket was charged for it (clientrate.go)
}

// prior is the running call a requeue replaces, and how its start ended: its provider frees
// its lanes as the requeue arrives.
type prior struct {
	c   *call
	end ending
}

// ending is how a started call ended, for its provider's health and learned lanes: the
// stream's last word on it, carried by released and freed.
type ending struct {
	attempts int       // backend attempts its stream made
	key      int       // the key of the last attempt
	opened   bool      // the backend answered
	err      error     // a backend error after it answered, or the last attempt's failure; nil for a clean end or a stop
	usage    llm.Usage // what the backend reported
	quota    *llm.Quota
	// charged are the replicas' shared buckets its leases and retries charged, for the
	// correction from its usage (sharedbuckets.go).
	charged []replicas.Bucket
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

// again is the call that carries on with the same request on the same model after c was
// refused for capacity on start st, which ended as end: a new id, its place in the FIFO and
// its deadline kept.
func (c *call) again(id policy.ID, attempts int, st *start, end ending) *call {
	arrived := c.arrived
	if arrived.IsZero() {
		arrived = st.entered()
	}
	return &call{id: id, ctx: c.ctx, req: c.req, route: c.route, prio: c.prio, client: c.client, reply: make(chan admitResult, 1),
		tokens: c.tokens, arrived: arrived, deadline: st.deadline, requeueOf: &prior{c: c, end: end}, attempts: c.attempts + attempts,
		requeues: c.requeues + 1, bound: c.bound, keyTokens: c.keyTokens}
}

// member is the call as the policy knows it running on model m.
func (c *call) member(m int) policy.Member {
	return policy.Member{ID: c.id, Model: m, Class: c.prio, Tokens: c.tokens, Client: c.client}
}

// admitResult answers a call: a running stream, or why not.
type admitResult struct {
	stream    *stream
	err       error
	queueWait time.Duration
}

// The messages the gateway's actors exchange. Each names who sends it to whom, and each is a
// message: what its loss in a crash means is its lost method (loss.go), so that a new type
// cannot be sent until it says.

// message is everything one actor, a timer or the gateway's API sends an actor. A crash loses
// the message the failing actor was handling; its parent's supervision strategy then calls
// lost, which makes good what the message would have done (see loss.go).
type message interface {
	lost(l *loss)
}

// send is the one way to send an actor a message: it takes only a message, so the compiler
// asks each new type what its loss means.
func send(from actor.SenderContext, to *actor.PID, m message) { from.Send(to, m) }

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
// its waiting arrivals and the acknowledgement of its last offer, from one dispatch, and the
// credit it may start arrivals on without offering them (nil: none).
type grants struct {
	g      []policy.Grant
	v      []policy.Verdict
	ack    *policy.Ack
	credit *policy.Credit
}

// recall, from the supervisor to a provider actor: offer again, giving back the credit it
// holds (policy.Recall).
type recall struct{ r policy.Recall }

// resync, from a rebuilt supervisor to every provider actor: report afresh for generation sync.
type resync struct{ sync uint64 }

// resyncTick, from the supervisor's timer to itself: ask the providers that have not
// answered a resync yet again.
type resyncTick struct{ sync uint64 }

// wake, from a provider actor's timer number timer (policy.Pacer) to itself: a queue
// deadline or a token is due.
type wake struct{ timer uint64 }

// offerDue, from a provider actor to itself: send the offer (after the messages before it).
type offerDue struct{}

// startCall, from a provider actor to the lane actor of the call's model: run it with what
// the provider decided as it started it.
type startCall struct {
	c   *call
	run start
}

// abort, from a provider actor to a lane actor: a call whose start the lane lost in a crash
// was answered with an error; drop whatever the lane holds of it, and give back the lease a
// batch member came with.
type abort struct {
	c     *call
	lease replicas.Lease
}

// released, from a stream to its lane actor: the backend has stopped; end is how the call
// ended. The stream tells its provider itself (freed), except for a capacity requeue
// (requeued), whose lane tells the provider.
type released struct {
	c        *call
	end      ending
	requeued bool
}

// freed, from a stream (or, for a call that never ran or was requeued, its lane actor) to its
// provider actor: a call's lanes are free; end says how it ended (nil for a call that never
// ran). It points at the ending its stream's released carried, which nobody writes once
// sent.
type freed struct {
	c   *call
	end *ending
}

// retryAsk, from a call's stream (in the caller's goroutine) to its provider actor: the
// attempt failed with err; record what it says and answer whether to try again, and how.
// Only failures ask, so a call that succeeds at once pays nothing.
type retryAsk struct {
	c        *call
	err      error
	key      int // the key the failed attempt used
	n        int // the failed attempt's number on this start (see run.recorded)
	attempts int // attempts made on this model, the failed one included
	backoffs int // of those retries, the ones that backed off
	tried    uint64
	// leased says the call holds leases on the replicas' shared limits, which charged the
	// shared buckets charged: a retry charges them again (sharedbuckets.go).
	leased  bool
	charged []replicas.Bucket
	reply   chan retryAnswer // buffered
}

// answer puts ans on the ask's reply unless an answer is there already: a failure path may
// answer an ask the actor answered before it failed in the same step (a crash in the offer
// that follows), and nobody reads a second answer, so it must never block.
func (m *retryAsk) answer(ans retryAnswer) {
	select {
	case m.reply <- ans:
	default:
	}
}

// retryAnswer is the provider's decision on a failed attempt: try again after wait on key,
// go back to the queue (a capacity refusal), or end with err.
type retryAnswer struct {
	retry   bool
	backoff bool
	key     int
	wait    time.Duration
	requeue bool
	err     error             // the error to answer with when neither; nil: the attempt's own
	charged []replicas.Bucket // a leased call's shared buckets once it retries
}

// reportRunning, from a provider actor rebuilding its state to each of its lane actors.
type reportRunning struct{}

// laneReport, from a lane actor to its provider actor: the calls running on the lane.
type laneReport struct {
	m     int
	calls []runningCall
}

// runningCall is a call a lane runs, as its rebuilt provider's policy resumes it: on which
// key, since when.
type runningCall struct {
	member  policy.Member
	started time.Time
	key     int
}

// cancelAll, from a provider actor to its lane actors: stop every running call with cause.
type cancelAll struct{ cause error }

// clientGone, from a running call's hang-up watcher to its request actor: the client of the
// call whose stream s is left.
type clientGone struct{ s *stream }

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
