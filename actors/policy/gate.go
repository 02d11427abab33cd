package policy

import (
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// ID identifies a request. The caller chooses ids; they must be unique among the requests
// the gate currently knows (an id may be reused once its request is finished or gone).
type ID uint64

// Limits are the gateway-wide caps. Zero MaxRunning lets nothing run; zero MaxAdmitted
// lets nothing wait.
type Limits struct {
	MaxRunning  int // requests running at once, across providers
	MaxAdmitted int // running + queued beyond which a request that cannot start is refused
}

// ProviderSpec is one provider's admission configuration. The gate takes numbers as given;
// defaults (SPEC §2) are the config package's business, so a zero here means zero: no
// lanes, no queue, or a queue timeout of nothing.
type ProviderSpec struct {
	Name         string
	Lanes        int           // requests running at once on the provider
	QueueLength  int           // requests waiting at most
	QueueTimeout time.Duration // how long one may wait
	Models       []ModelSpec
	// RPM limits starts per minute with a token bucket; 0 means no rate limit.
	RPM int
	// Burst is the bucket's capacity; 0 means max(1, RPM/6). Ignored without RPM.
	Burst int
}

// ModelSpec is one model of a provider.
type ModelSpec struct {
	Name  string
	Lanes int // model_lanes: requests for this model running at once
}

// Outcome is what Arrive decided. The zero value is not an outcome.
type Outcome uint8

const (
	Started  Outcome = iota + 1 // runs now: the caller starts it
	Queued                      // waits; a later Dispatch starts it, or Expire or Cancel ends it
	Rejected                    // refused with the returned kind; the gate has forgotten it
)

func (o Outcome) String() string {
	switch o {
	case Started:
		return "started"
	case Queued:
		return "queued"
	case Rejected:
		return "rejected"
	}
	return "invalid"
}

// Gate is the admission state of the whole gateway. Provider p is the index of its spec in
// New's slice and model m the index in that provider's Models.
type Gate struct {
	limits    Limits
	providers []provider
	models    []model // all providers' models, each provider's contiguous
	entries   []entry
	free      int32
	index     map[ID]int32

	running, queued int
	queuedByClass   [llm.NumPriorities]int
	lastServed      [llm.NumPriorities]int // per class: the provider that class started last
	seq             uint64

	held   []int32   // started by Arrive, to be reported by the next Dispatch
	heldAt time.Time // when the oldest of them started
	scan   []int32   // Arrive's scratch list of what its dispatcher started
}

type provider struct {
	name          string
	lanes, eff    int
	running       int
	queued        int
	queuedByClass [llm.NumPriorities]int
	queueLength   int
	timeout       time.Duration
	first, n      int // its models are g.models[first : first+n]
	arrivals      list
	bucket        bucket
}

type model struct {
	name    string
	lanes   int
	running int
	queued  int
	fifo    [llm.NumPriorities]list
}

// New builds a gate with every lane free. The slices are copied; the gate keeps no
// reference to them.
func New(l Limits, providers []ProviderSpec) *Gate {
	g := &Gate{limits: l, free: none}
	g.providers = make([]provider, len(providers))
	for i, ps := range providers {
		g.providers[i] = provider{
			name: ps.Name, lanes: max(ps.Lanes, 0), eff: max(ps.Lanes, 0),
			queueLength: max(ps.QueueLength, 0), timeout: ps.QueueTimeout,
			first: len(g.models), n: len(ps.Models),
			arrivals: newList(), bucket: newBucket(ps.RPM, ps.Burst),
		}
		for _, ms := range ps.Models {
			md := model{name: ms.Name, lanes: max(ms.Lanes, 0)}
			for c := range md.fifo {
				md.fifo[c] = newList()
			}
			g.models = append(g.models, md)
		}
	}
	for c := range g.lastServed {
		g.lastServed[c] = len(g.providers) - 1 // so the first turn goes to provider 0
	}
	// Size for the worst case so steady state never grows: everything admitted plus what
	// may start past MaxAdmitted (see the package comment).
	size := max(l.MaxAdmitted, 0) + max(l.MaxRunning, 0) + 1
	g.entries = make([]entry, 0, size)
	g.index = make(map[ID]int32, size)
	g.held = make([]int32, 0, max(l.MaxRunning, 0))
	g.scan = make([]int32, 0, max(l.MaxRunning, 0)+1)
	return g
}

// Arrive admits request id for model m of provider p with class prio at now. It returns
// Started when the request runs now (the caller starts it), Queued when it waits (until
// now + the provider's QueueTimeout at most), or Rejected with llm.KindOverloaded or
// llm.KindQueueFull (or, for a caller's mistake, llm.KindModelNotFound for an unknown p/m
// and llm.KindInvalidRequest for an unknown class or an id already admitted). The kind is
// meaningful only with Rejected. A rejected request changes nothing.
func (g *Gate) Arrive(id ID, p, m int, prio llm.Priority, now time.Time) (Outcome, llm.Kind) {
	if p < 0 || p >= len(g.providers) || m < 0 || m >= g.providers[p].n {
		return Rejected, llm.KindModelNotFound
	}
	if prio < 0 || prio >= llm.NumPriorities {
		return Rejected, llm.KindInvalidRequest
	}
	if _, dup := g.index[id]; dup {
		return Rejected, llm.KindInvalidRequest
	}
	e := g.enqueue(id, p, g.providers[p].first+m, uint8(prio), now)

	// No barging: the newcomer starts only if the dispatcher, which sees it at the tail of
	// its FIFO, picks it. Anything else it starts had become eligible before (see doc.go).
	started := false
	g.scan = g.scan[:0]
	for x := g.pick(now); x != none; x = g.pick(now) {
		g.start(x, now)
		if x == e {
			started = true
		} else {
			g.scan = append(g.scan, x)
		}
	}
	g.hold(g.scan, now)
	if started {
		return Started, 0
	}

	// The rejections, in SPEC order, counted without the newcomer.
	pr := &g.providers[p]
	switch {
	case g.running+g.queued-1 >= g.limits.MaxAdmitted:
		g.dequeue(e)
		g.release(e)
		return Rejected, llm.KindOverloaded
	case pr.queued-1 >= pr.queueLength:
		g.dequeue(e)
		g.release(e)
		return Rejected, llm.KindQueueFull
	}
	return Queued, 0
}

// hold records entries started by Arrive that the caller has not been told about.
func (g *Gate) hold(xs []int32, now time.Time) {
	if len(xs) == 0 {
		return
	}
	if len(g.held) == 0 {
		g.heldAt = now
	}
	for _, x := range xs {
		g.entries[x].state = held
	}
	g.held = append(g.held, xs...)
}

// enqueue links a new entry into its queues and counts.
func (g *Gate) enqueue(id ID, p, m int, class uint8, now time.Time) int32 {
	e := g.alloc()
	pr := &g.providers[p]
	g.seq++
	g.entries[e] = entry{
		id: id, p: int32(p), m: int32(m), class: class, state: queued, seq: g.seq,
		arrived: now, deadline: now.Add(pr.timeout),
	}
	g.index[id] = e
	g.push(&g.models[m].fifo[class], byModel, e)
	g.push(&pr.arrivals, byArrival, e)
	g.queued++
	g.queuedByClass[class]++
	pr.queued++
	pr.queuedByClass[class]++
	g.models[m].queued++
	return e
}

// dequeue unlinks a queued entry from its queues and counts; the entry stays allocated.
func (g *Gate) dequeue(e int32) {
	en := &g.entries[e]
	pr, md := &g.providers[en.p], &g.models[en.m]
	g.unlink(&md.fifo[en.class], byModel, e)
	g.unlink(&pr.arrivals, byArrival, e)
	g.queued--
	g.queuedByClass[en.class]--
	pr.queued--
	pr.queuedByClass[en.class]--
	md.queued--
}

// start moves a queued entry to running, taking its lanes and a rate-limit token.
func (g *Gate) start(e int32, now time.Time) {
	g.dequeue(e)
	en := &g.entries[e]
	pr := &g.providers[en.p]
	en.state = running
	en.started = now
	g.running++
	pr.running++
	g.models[en.m].running++
	pr.bucket.take(now)
	g.lastServed[en.class] = int(en.p)
}

// stop gives back the lanes of a running or held entry and frees it.
func (g *Gate) stop(e int32) {
	en := &g.entries[e]
	g.running--
	g.providers[en.p].running--
	g.models[en.m].running--
	g.release(e)
}

// Finish releases the lanes of a running request. It returns false, changing nothing, for
// an id that is unknown, still queued, or held (started by Arrive but not yet reported by
// Dispatch, so the caller cannot have run it). It does not start anything: call Dispatch.
// now is not used today (a lane is free the moment Finish is called); it is part of the
// signature so charging on completion needs no change in the owner.
func (g *Gate) Finish(id ID, now time.Time) bool {
	e, ok := g.index[id]
	if !ok || g.entries[e].state != running {
		return false
	}
	g.stop(e)
	return true
}

// Cancel removes a queued request, returning true; false for an unknown or running one. A
// held request (see Arrive) is still queued as far as the caller knows: its start is
// undone (its lanes are given back; the rate-limit token it took stays spent) and Cancel
// returns true. Call Dispatch afterwards: a freed place in a queue or lane may let others in.
func (g *Gate) Cancel(id ID) bool {
	e, ok := g.index[id]
	if !ok {
		return false
	}
	switch g.entries[e].state {
	case queued:
		g.dequeue(e)
		g.release(e)
		return true
	case held:
		for i, x := range g.held {
			if x == e {
				g.held = append(g.held[:i], g.held[i+1:]...)
				break
			}
		}
		g.stop(e)
		return true
	}
	return false
}

// SetEffectiveLanes sets how many of provider p's lanes may be used (SPEC §7
// effective_lanes), clamped to [0, Lanes]. Lowering it stops nothing already running; new
// requests wait until running drops below it. Call Dispatch afterwards when it was raised.
func (g *Gate) SetEffectiveLanes(p, n int) {
	if p < 0 || p >= len(g.providers) {
		return
	}
	pr := &g.providers[p]
	pr.eff = min(max(n, 0), pr.lanes)
}

// Running is the number of requests running (including held ones).
func (g *Gate) Running() int { return g.running }

// Queued is the number of requests waiting.
func (g *Gate) Queued() int { return g.queued }
