package actors

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tollgate/tollgate/providers/llm"
)

// What the loss of each message in a crash means: the crash table of docs/architecture.md,
// by type. A crash loses the message the failing actor was handling; its parent's strategy
// (supervision.go) hands it a loss, and the message's lost method does one of three things:
//
//   - answer: a call or question it carries is answered (a call 503 provider_unavailable,
//     never retried: the message may be what crashes the actor);
//   - again: a message that only frees, withdraws or carries its whole target is sent again
//     (handling one twice is harmless);
//   - nothing: its effect is re-derived by the rebuild (grants are void in the new epoch,
//     verdicts are given again, timers re-armed, offers asked for anew).
//
// TestCrashEveryMessageType checks this table against the code and crashes each actor kind
// on each message it receives.

// loss is a crash as a supervision strategy sees it: the actor that failed, and what the
// message it was handling needs to be made good.
type loss struct {
	g     *Gateway
	kind  faultKind  // who failed, for a loss that would differ by kind (none does yet)
	child *actor.PID // the actor that failed
	p     int        // a failed provider's slot, or a failed lane's provider's; -1: not known
	name  string     // that provider's name; "?" when not known
	// lanes is a failed lane's provider actor: its strategy runs in the provider's own step,
	// so a lost start may give its grant back to the provider's policy.
	lanes *providerActor
}

// lose makes good what msg would have done; a message that is not ours (protoactor's own
// lifecycle messages) has nothing to make good.
func lose(msg any, l *loss) {
	if m, ok := msg.(message); ok {
		m.lost(l)
	}
}

// again sends m to the failed actor again, after its rebuild.
func (l *loss) again(m message) { send(l.g.system.Root, l.child, m) }

// lostCall answers a call whose message an actor failed on, after queueWait in its queue.
func lostCall(c *call, where string, queueWait time.Duration) bool {
	return c.answer(admitResult{queueWait: queueWait, err: &llm.Error{Kind: llm.KindProviderUnavailable,
		Provider: c.route.provider, RetryAfter: time.Second,
		Message: "internal fault in provider " + c.route.provider + "'s " + where + " while handling this request; it did not run; try again"}})
}

// Answered: the call or question the message carries.

// lost arrive: the call is answered; the rebuild may have queued it again, so it is
// withdrawn, and the refused call it replaced gives its lanes back.
func (m *arrive) lost(l *loss) {
	lostCall(m.c, "actor", 0)
	l.again(&withdraw{c: m.c})
	if old := m.c.requeueOf; old != nil {
		l.again(&freed{c: old.c, end: &old.end})
	}
}

// lost retryAsk: answered as it is, never retried past a crash; its ending records it.
func (m *retryAsk) lost(*loss) { m.answer(retryAnswer{}) }

// lost unleased: the rebuild does not know the call, since it ran nowhere.
func (m *unleased) lost(*loss) { lostCall(m.c, "actor", m.run.queueWait()) }

// lost startCall: the call is answered and its grant given back to the provider's policy
// (offering what that frees); the lane drops whatever of it it made before it failed.
func (m *startCall) lost(l *loss) {
	a := l.lanes
	now := a.g.now()
	if lostCall(m.c, "lane for "+m.c.route.model, m.run.queueWait()) {
		if a.pol.Finish(m.c.id, now) {
			send(l.g.system.Root, a.g.supervisor, &offer{p: a.p, o: a.pol.Offer(now)})
		}
		l.again(&abort{c: m.c, lease: m.run.leases().lease})
	}
}

func (m *addModel) lost(l *loss) {
	m.reply <- fmt.Errorf("internal fault in provider %s while adding models; try again", l.name)
}

func (m *stateQuery) lost(l *loss) {
	m.reply <- statePart{p: l.p, provider: ProviderState{Name: l.name, State: "restarting"}}
}

// lost startBatch: refused, nothing of it ran; the client may try again.
func (m *startBatch) lost(*loss) {
	m.b.decide(&llm.Error{Kind: llm.KindBatchCapacity, RetryAfter: time.Second,
		Message: "internal fault in the gateway's supervisor while admitting this batch; nothing ran, try again"})
}

// Sent again: each is harmless twice; a reload's parts carry their whole target.

func (m *withdraw) lost(l *loss)            { l.again(m) }
func (m *freed) lost(l *loss)               { l.again(m) }
func (m *drainAll) lost(l *loss)            { l.again(m) }
func (m *resync) lost(l *loss)              { l.again(m) }
func (m *laneReport) lost(l *loss)          { l.again(m) }
func (m *failNow) lost(l *loss)             { l.again(m) }
func (m *reserve) lost(l *loss)             { l.again(m) }
func (m *settle) lost(l *loss)              { l.again(m) }
func (m *reconfigureProvider) lost(l *loss) { l.again(m) }
func (m *retire) lost(l *loss)              { l.again(m) }
func (m *retireCheck) lost(l *loss)         { l.again(m) }
func (m *leaseFreed) lost(l *loss)          { l.again(m) }
func (m *keyCooled) lost(l *loss)           { l.again(m) }
func (m *breakerShared) lost(l *loss)       { l.again(m) }
func (m *lanesShared) lost(l *loss)         { l.again(m) }
func (m *lanesPublished) lost(l *loss)      { l.again(m) }
func (m *readShared) lost(l *loss)          { l.again(m) }
func (m *released) lost(l *loss)            { l.again(m) }
func (m *reportRunning) lost(l *loss)       { l.again(m) }
func (m *cancelAll) lost(l *loss)           { l.again(m) }
func (m *abort) lost(l *loss)               { l.again(m) }
func (m *leased) lost(l *loss)              { l.again(m) }
func (m *providerIdle) lost(l *loss)        { l.again(m) }
func (m *reserved) lost(l *loss)            { l.again(m) }
func (m *reconfigure) lost(l *loss)         { l.again(m) }
func (m *providerRetired) lost(l *loss)     { l.again(m) }

// Nothing: the rebuild re-derives it.

func (*grants) lost(*loss)      {} // void in the provider's new epoch; the dispatch grants again
func (*recall) lost(*loss)      {} // the rebuilt provider offers afresh, holding no credit
func (*wake) lost(*loss)        {} // the rebuild re-arms the provider's timer
func (offerDue) lost(*loss)     {} // the rebuild offers
func (*offer) lost(*loss)       {} // the rebuilt supervisor asks every provider to report (resync)
func (*dispatchNow) lost(*loss) {} // the rebuilt supervisor dispatches once the reports are in
func (*resyncTick) lost(*loss)  {} // the rebuild starts its own resync, with its own timer
func (*clientGone) lost(*loss)  {} // the request actor stops, and its stopping cancels the call
