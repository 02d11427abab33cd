package policy

import "github.com/tollgate/tollgate/providers/llm"

// fairScale is the service one start costs a client of weight 1; a client of weight w is
// charged fairScale/w, so service tags compare starts per weight in integers. It is the
// least common multiple of 1 to 16: weights up to 16 are charged exactly, larger ones to
// within a rounding.
const fairScale = 720720

// queue is a provider's admitted requests and the order they wait in (SPEC §2, §18): per
// client, model and class a FIFO by arrival; the deadline order across them all; counts at
// every level; and each client's service per class, by which the starts of a class are
// shared between clients by weighted fair queuing.
//
// Fair queuing keeps, per client and class, a service tag: the starts it was given, each
// costing fairScale/weight. The client with the lowest tag among those with a request that
// can start goes next (tie: the one whose request arrived first), so two backlogged clients
// share starts by weight; one with nothing that can start takes nothing, so its share goes
// to the others. A client whose class queue was empty takes up the tag of the latest start
// (vtime) if its own is lower: being idle earns no credit for later. A client's slot is kept
// once made (clients are the configured and created keys, a handful), so its tags last.
type queue struct {
	slab
	deadlines list
	n         int // queued entries
	confirmed int // queued entries the dispatcher's verdict kept
	byClass   [llm.NumPriorities]int
	byModel   [][llm.NumPriorities]int // queued per model and class
	clients   []client
	byName    map[string]int32
	vtime     [llm.NumPriorities]int64 // per class: the highest tag a start was charged at
	shares    *Shares                  // the clients' service at max_running; nil: none kept
}

// client is one client's part of a provider's queue.
type client struct {
	name    string
	share   int
	maxRun  int                       // its max_running, gateway-wide (Slots); 0: no cap of its own
	fifo    [llm.NumPriorities][]list // per class, per model (grown as its requests come)
	byClass [llm.NumPriorities]int
	queued  int
	running int
	tag     [llm.NumPriorities]int64
	svc     *serviceTags // its service at max_running (Shares); nil without shares
}

func newQueue(size, models int) queue {
	return queue{slab: newSlab(size), deadlines: newList(), byModel: make([][llm.NumPriorities]int, models),
		byName: map[string]int32{}}
}

// addModel makes room for one more model's requests.
func (q *queue) addModel() { q.byModel = append(q.byModel, [llm.NumPriorities]int{}) }

// clientFor returns the slot of client c, made on its first request. A client's weight and
// cap are the latest its calls brought.
func (q *queue) clientFor(c llm.Client) int32 {
	k, ok := q.byName[c.Name]
	if !ok {
		q.clients = append(q.clients, client{name: c.Name})
		if q.shares != nil {
			q.clients[len(q.clients)-1].svc = q.shares.of(c.Name)
		}
		k = int32(len(q.clients) - 1)
		q.byName[c.Name] = k
	}
	q.clients[k].share = c.Share()
	q.clients[k].maxRun = max(c.MaxRunning, 0)
	return k
}

// fifo returns the FIFO of client k's requests of class c for model m.
func (q *queue) fifo(k int32, c uint8, m int32) *list {
	cl := &q.clients[k]
	for int(m) >= len(cl.fifo[c]) {
		cl.fifo[c] = append(cl.fifo[c], newList())
	}
	return &cl.fifo[c][m]
}

// head is the oldest request of client k, class c and model m, or none.
func (q *queue) head(k int32, c int, m int) int32 {
	if f := q.clients[k].fifo[c]; m < len(f) {
		return f[m].head
	}
	return none
}

// link puts queued entry e in its FIFO and in the deadline order, by its arrival and
// deadline, and counts it.
func (q *queue) link(e int32) {
	en := &q.entries[e]
	cl := &q.clients[en.client]
	if cl.byClass[en.class] == 0 {
		cl.tag[en.class] = max(cl.tag[en.class], q.vtime[en.class])
		if cl.svc != nil {
			q.shares.floor(cl.svc, int(en.class))
		}
	}
	q.insert(q.fifo(en.client, en.class, en.m), byModel, e)
	q.insert(&q.deadlines, byDeadline, e)
	q.n++
	q.byClass[en.class]++
	q.byModel[en.m][en.class]++
	cl.byClass[en.class]++
	cl.queued++
	if en.confirmed {
		q.confirmed++
	}
}

// dequeue unlinks a queued entry from its queues and counts; the entry stays allocated.
func (q *queue) dequeue(e int32) {
	en := &q.entries[e]
	cl := &q.clients[en.client]
	q.unlink(q.fifo(en.client, en.class, en.m), byModel, e)
	q.unlink(&q.deadlines, byDeadline, e)
	q.n--
	q.byClass[en.class]--
	q.byModel[en.m][en.class]--
	cl.byClass[en.class]--
	cl.queued--
	if en.confirmed {
		q.confirmed--
	}
}

// running counts entry e as running without charging its client: a batch member or a
// request restored after a crash, which took no turn from a queue. With slots it also
// takes a slot of its client's max_running whatever the cap: the batch rule admits a batch
// whole.
func (q *queue) running(e int32, slots *Slots) {
	q.clients[q.entries[e].client].running++
	q.claim(e, slots, true)
}

// chargeShares charges running entry e's start at max_running (Shares), for a start the
// dispatcher did not grant.
func (q *queue) chargeShares(e int32) {
	en := &q.entries[e]
	if cl := &q.clients[en.client]; cl.svc != nil {
		q.shares.charge(cl.svc, int(en.class), cl.share)
	}
}

// started counts queued entry e as running and charges its client for the start.
func (q *queue) started(e int32) {
	en := &q.entries[e]
	cl := &q.clients[en.client]
	cl.running++
	q.vtime[en.class] = max(q.vtime[en.class], cl.tag[en.class])
	cl.tag[en.class] += startCost(cl.share)
}

// stopped counts running entry e as no longer running, here and, if it took a slot, in
// slots.
func (q *queue) stopped(e int32, slots *Slots) {
	q.clients[q.entries[e].client].running--
	q.unclaim(e, slots)
}

// unclaim gives back the slot entry e took, if it took one.
func (q *queue) unclaim(e int32, slots *Slots) {
	if en := &q.entries[e]; en.counted {
		en.counted = false
		slots.Put(q.clients[en.client].name, q.clients[en.client].maxRun)
	}
}

// claim takes a gateway-wide slot for queued entry e's start if its client has a cap,
// reporting false when the client has no room (another provider took its last slot since
// the simulation looked); with force it counts the start whatever the cap.
func (q *queue) claim(e int32, slots *Slots, force bool) bool {
	en := &q.entries[e]
	cl := &q.clients[en.client]
	if slots == nil || cl.maxRun == 0 {
		return true
	}
	if !slots.Take(cl.name, cl.maxRun, force) {
		return false
	}
	en.counted = true
	return true
}

// room is how many more calls client k may start gateway-wide, or -1 for no cap.
func (q *queue) room(k int, slots *Slots) int {
	if cl := &q.clients[k]; slots != nil && cl.maxRun > 0 {
		return max(slots.Room(cl.name, cl.maxRun), 0)
	}
	return -1
}

// capped reports whether some client with queued requests has a cap of its own.
func (q *queue) capped(slots *Slots) bool {
	if slots == nil {
		return false
	}
	for k := range q.clients {
		if q.clients[k].maxRun > 0 && q.clients[k].queued > 0 {
			return true
		}
	}
	return false
}

// soleClient is the one client with requests of class c queued, or -1 when there are
// several.
func (q *queue) soleClient(c int) int {
	k := -1
	for i := range q.clients {
		if q.clients[i].byClass[c] > 0 {
			if k >= 0 {
				return -1
			}
			k = i
		}
	}
	return k
}

// startCost is the service one start charges a client of the given share.
func startCost(share int) int64 { return fairScale / int64(min(max(share, 1), fairScale)) }

// ClientCounts is one client's requests at a provider.
type ClientCounts struct {
	Running, Queued int
}

// byClient returns the running and queued requests of every client with some, by name.
func (q *queue) byClient() map[string]ClientCounts {
	out := make(map[string]ClientCounts, len(q.clients))
	for k := range q.clients {
		if cl := &q.clients[k]; cl.running+cl.queued > 0 {
			out[cl.name] = ClientCounts{Running: cl.running, Queued: cl.queued}
		}
	}
	return out
}

// forget removes a queued entry altogether.
func (q *queue) forget(e int32) {
	q.dequeue(e)
	q.release(e)
}

// unjudged reports the queued requests without a verdict: how many are fresh (not yet
// acknowledged; those first reported now are stamped with offer), and the acknowledged
// ones, in arrival order. Verdicts and acknowledgements both come in arrival order, so all
// these are the newest requests, the deadline list's tail, the fresh ones last (a request
// that came back confirmed, a capacity requeue or a fallback, may sit among them).
func (q *queue) unjudged(offer uint64) (fresh int, pending []ID) {
	n := q.n - q.confirmed
	if n == 0 {
		return 0, nil
	}
	var ids []ID
	for e := q.deadlines.tail; e != none && n > 0; e = q.entries[e].links[byDeadline].prev {
		en := &q.entries[e]
		if en.confirmed {
			continue
		}
		n--
		if !en.mature {
			if en.reported == 0 {
				en.reported = offer
			}
			fresh++
			continue
		}
		if ids == nil {
			ids = make([]ID, n+1)
		}
		ids[n] = en.id
	}
	if ids == nil {
		return fresh, nil
	}
	return fresh, ids[n:]
}
