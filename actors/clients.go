package actors

import (
	"strconv"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tollgate/tollgate/actors/policy"
	"github.com/tollgate/tollgate/providers/llm"
)

// Clients (SPEC §18): who a call is for comes in its context (llm.ClientOf), read once in
// Start. Each provider's policy shares its starts between clients by weight and holds each
// to its max_running through the slots all providers share (Gateway.running); the gateway
// holds each client to its max_queued here, and answers a revoked client's queued calls.

// clientTally counts each client's calls waiting in admission, gateway-wide, for
// max_queued: a call counts while it waits (for its key's tokens, in a queue, back in one
// after a capacity refusal, in a fallback's), not while it runs.
type clientTally struct {
	mu      sync.Mutex
	waiting map[string]int
}

// enter counts a call of c as waiting, or reports false, counting nothing, when c already
// has its max_queued waiting; with force it counts the call whatever the cap (a call back
// in a queue, which keeps the place it had).
func (t *clientTally) enter(c llm.Client, force bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !force && c.MaxQueued > 0 && t.waiting[c.Name] >= c.MaxQueued {
		return false
	}
	if t.waiting == nil {
		t.waiting = map[string]int{}
	}
	t.waiting[c.Name]++
	return true
}

// leave counts a call of c entered as no longer waiting.
func (t *clientTally) leave(c llm.Client) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.waiting[c.Name]--; t.waiting[c.Name] <= 0 {
		delete(t.waiting, c.Name)
	}
}

// clientWait is one call's count in its client's max_queued. It is the call's own, used by
// its caller's goroutine only.
type clientWait struct {
	t  *clientTally // nil: the client is not counted
	c  llm.Client
	in bool // counted as waiting now
}

// out counts the call as no longer waiting: it started, or was turned away. Again, it does
// nothing.
func (w *clientWait) out() {
	if w.in {
		w.t.leave(w.c)
		w.in = false
	}
}

// again counts the call as waiting once more, whatever the cap: it goes back to a queue.
func (w *clientWait) again() {
	if w.t != nil && !w.in {
		w.t.enter(w.c, true)
		w.in = true
	}
}

// admitClient counts a call for client c as waiting, or answers client_concurrency_limited
// when c already has its max_queued waiting. A client without max_queued (the anonymous one
// among them) is not counted, which keeps the common path free of the lock: a cap set by an
// edit holds for the calls that enter from then on.
func (g *Gateway) admitClient(c llm.Client) (clientWait, error) {
	if c.MaxQueued <= 0 {
		return clientWait{}, nil
	}
	if !g.clients.enter(c, false) {
		return clientWait{}, &llm.Error{Kind: llm.KindClientConcurrency, RetryAfter: g.RetryAfter(),
			Message: "client key " + strconv.Quote(c.Name) + " already has its max_queued (" +
				strconv.Itoa(c.MaxQueued) + ") calls waiting; try again later"}
	}
	return clientWait{t: &g.clients, c: c, in: true}, nil
}

// revokeClient, from Gateway.RevokeClient to each provider actor: answer the waiting calls
// of client name invalid_api_key, and say how many there were.
type revokeClient struct {
	name  string
	reply chan revoked // buffered for every provider asked; an answer past it (a repeat) is dropped
}

// revoked answers revokeClient: provider p answered n waiting calls.
type revoked struct{ p, n int }

// Sent again: a second sweep finds nothing more and says 0.
func (m *revokeClient) lost(l *loss) { l.again(m) }

// revoke answers the waiting calls of m's client and tells how many. Running calls finish.
// While the provider rebuilds, its policy is filled from the waiting calls afterwards, so
// they are only taken out of them.
func (a *providerActor) revoke(ctx actor.Context, m *revokeClient) {
	now := a.g.now()
	n := 0
	for id, w := range a.waiting {
		if w.c.client.Name != m.name {
			continue
		}
		err := &llm.Error{Kind: llm.KindInvalidAPIKey, Message: "the client key " + strconv.Quote(m.name) +
			" was revoked while this call waited"}
		if a.rebuilding {
			delete(a.waiting, id)
			w.c.answer(admitResult{err: err, queueWait: w.queueWait(now)})
		} else {
			a.answerWaiting(id, err, now)
		}
		n++
	}
	if n > 0 && !a.rebuilding && !a.failed {
		a.offer(ctx, now)
	}
	select {
	case m.reply <- revoked{p: a.p, n: n}:
	default:
	}
}

// revokeTimeout bounds RevokeClient's wait for the provider actors, as stateTimeout does
// State's.
const revokeTimeout = 2 * time.Second

// RevokeClient answers every queued call of client name 401 invalid_api_key and returns how
// many it answered; calls of the client already running finish. The HTTP layer calls it
// when a key is revoked, after it stops taking the key, so no call of it queues after.
// A provider that does not answer within revokeTimeout (rebuilding after a crash) still
// answers its calls when its turn comes; they are not counted.
func (g *Gateway) RevokeClient(name string) int {
	g.rates.forget(name)
	t := g.table.Load()
	select {
	case <-g.stopped:
		return 0
	default:
	}
	reply := make(chan revoked, len(t.provs))
	asked := map[int]int{} // slot → slot, for closedSince
	for p, pv := range t.provs {
		// A retired provider has nothing queued, and may have stopped (its mailbox with it).
		if pid := pv.slot.pid.Load(); pid != nil && !pv.slot.retired.Load() {
			send(g.system.Root, pid, &revokeClient{name: name, reply: reply})
			asked[p] = p
		}
	}
	closed := closedSince(t, asked)
	answered := map[int]bool{}
	timeout := time.NewTimer(revokeTimeout)
	defer timeout.Stop()
	n := 0
	for len(answered) < len(asked)-len(closed) {
		select {
		case r := <-reply:
			if !closed[r.p] && !answered[r.p] { // a repeat (sent again after a crash) says 0
				answered[r.p] = true
				n += r.n
			}
		case <-timeout.C:
			return n
		case <-g.stopped:
			return n
		}
	}
	return n
}

// clientRoom, from the slots to every provider actor: a client's room under its max_running
// came or went (one of its calls stopped at its cap, or a start took its last slot), so what a
// provider holding its calls could start has changed, and the dispatcher waits to know it
// (policy.Slots): it offers afresh.
type clientRoom struct{}

// Sent again: an offer more changes nothing.
func (m *clientRoom) lost(l *loss) { l.again(m) }

// newClientSlots returns g's client slots, which tell every provider actor when a client's
// room under its max_running comes or goes. The slots call that from the provider actor whose
// call stopped or started, so it only sends.
func newClientSlots(g *Gateway) *policy.Slots {
	return policy.NewSlots(func(string) { tellClientRoom(g) })
}

func tellClientRoom(g *Gateway) {
	for _, s := range g.slots.all() {
		if pid := s.pid.Load(); pid != nil && !s.retired.Load() {
			send(g.system.Root, pid, &clientRoom{})
		}
	}
}
