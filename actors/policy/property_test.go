package policy

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/tollgate/tollgate/actors/policy/keys"
	"github.com/tollgate/tollgate/actors/policy/tokens"
	"github.com/tollgate/tollgate/providers/llm"
)

// The property tests drive the two halves composed through the protocol (composed_test.go)
// and the reference model with the same random operations. Each operation is handled to
// quiescence, as the actors handle an event when nothing else arrives meanwhile, and every
// answer must match the reference: outcomes, the exact order of starts, expiries, counts,
// lookups, retry hints and wake-ups. interleave_test.go covers messages in flight.

// source yields the random choices: a seeded PRNG, or fuzz bytes.
type source interface {
	intn(n int) int // in [0, n)
	done() bool
}

type randSource struct{ r *rand.Rand }

func (s randSource) intn(n int) int { return s.r.IntN(n) }
func (s randSource) done() bool     { return false }

type byteSource struct{ b []byte }

func (s *byteSource) intn(n int) int {
	if len(s.b) == 0 {
		return 0
	}
	v := int(s.b[0])
	s.b = s.b[1:]
	return v % n
}
func (s *byteSource) done() bool { return len(s.b) == 0 }

// fate is what the caller has seen of a request; each id must end in exactly one of
// finished, rejected, expired or cancelled.
type fate int

const (
	fateQueued fate = iota + 1
	fateRunning
	fateFinished
	fateRejected
	fateExpired
	fateCancelled
)

type driver struct {
	t      testing.TB
	src    source
	now    time.Time
	specs  []ProviderSpec
	limits Limits
	g      *composed
	ref    *refGate
	fates  map[ID]fate
	nextID ID
	step   int
	last   string         // the last operation, for failure messages
	stats  map[string]int // how often each case arose, to show the generator reaches it
	buf    []ID
	// addModels lets run add models to providers mid-sequence (see models_test.go).
	addModels bool
}

func randomConfig(src source) (Limits, []ProviderSpec) {
	np := 1 + src.intn(3)
	specs := make([]ProviderSpec, np)
	for p := range specs {
		ps := ProviderSpec{
			Name: fmt.Sprintf("p%d", p), Lanes: rarelyZero(src, 3), QueueLength: src.intn(5),
			QueueTimeout: time.Duration(1+src.intn(20)) * time.Second,
		}
		if src.intn(3) == 0 {
			ps.RPM = []int{6, 30, 60, 600}[src.intn(4)]
			ps.Burst = src.intn(4)
		}
		if src.intn(4) == 0 {
			ps.TPM = []int{600, 3000, 60000}[src.intn(3)]
		}
		// Key pools: the provider's own, and sometimes one more for models with keys of their
		// own; sometimes with each key's own rate limit.
		for range 1 + src.intn(2) {
			kp := KeyPool{Ring: keys.New(1+src.intn(3), testKeys)}
			if src.intn(3) == 0 {
				kp.Limit = tokens.Limit{RPM: []int{0, 6, 60}[src.intn(3)], TPM: []int{0, 600, 6000}[src.intn(3)], Burst: src.intn(3)}
			}
			ps.Keys = append(ps.Keys, kp)
		}
		for m := range 1 + src.intn(3) {
			ps.Models = append(ps.Models, ModelSpec{Name: fmt.Sprintf("p%d-m%d", p, m), Lanes: rarelyZero(src, 2),
				Keys: src.intn(len(ps.Keys))})
		}
		specs[p] = ps
	}
	mr := rarelyZero(src, 5)
	return Limits{MaxRunning: mr, MaxAdmitted: src.intn(mr + 8)}, specs
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// rarelyZero returns a number in [1, n], or 0 one time in ten: a lane count of zero is
// legal (nothing starts) but should not dominate the runs.
func rarelyZero(src source, n int) int {
	if src.intn(10) == 0 {
		return 0
	}
	return 1 + src.intn(n)
}

// contendedConfig is randomConfig with long queues and the room to admit them, so that
// calls of several clients wait at several providers for max_running at once: where the
// dispatcher's choice between providers follows the clients' shares (Shares).
func contendedConfig(src source) (Limits, []ProviderSpec) {
	l, specs := randomConfig(src)
	if len(specs) == 1 {
		specs = append(specs, ProviderSpec{Name: "p1", Models: []ModelSpec{{Name: "p1-m0"}}, Keys: []KeyPool{{Ring: keys.New(1, testKeys)}}})
	}
	lanes := 0
	for i := range specs {
		ps := &specs[i]
		ps.Lanes, ps.QueueLength = 2+src.intn(4), 4+src.intn(12)
		ps.QueueTimeout = time.Duration(20+src.intn(40)) * time.Second
		if src.intn(4) > 0 { // mostly no rate limit: the lanes and the cap decide
			ps.RPM, ps.TPM = 0, 0
		}
		for m := range ps.Models {
			ps.Models[m].Lanes = 1 + src.intn(ps.Lanes)
		}
		lanes += ps.Lanes
	}
	l.MaxRunning = 1 + src.intn(lanes-1)
	l.MaxAdmitted = l.MaxRunning + 12 + src.intn(30)
	return l, specs
}

func newDriver(t testing.TB, src source, stats map[string]int) *driver {
	return newDriverOf(t, src, stats, randomConfig)
}

func newDriverOf(t testing.TB, src source, stats map[string]int, config func(source) (Limits, []ProviderSpec)) *driver {
	l, specs := config(src)
	return &driver{
		t: t, src: src, now: t0, specs: specs, limits: l,
		g: newComposed(l, specs), ref: newRef(l, specs), fates: map[ID]fate{}, stats: stats,
	}
}

func (d *driver) fatalf(format string, args ...any) {
	d.t.Helper()
	if traceOn {
		for p, pr := range d.g.ps {
			d.t.Logf("provider %d: %+v offer %+v", p, pr.Snapshot(), pr.Offer(d.now))
			for e := range pr.q.entries {
				if en := pr.q.entries[e]; en.state != free {
					d.t.Logf("  entry %+v", en)
				}
			}
		}
		d.t.Logf("dispatcher: %+v", *d.g.d)
		for _, q := range d.ref.reqs {
			d.t.Logf("  ref %+v", *q)
		}
	}
	d.t.Fatalf("step %d (%s): %s\nlimits %+v\nproviders %+v", d.step, d.last, fmt.Sprintf(format, args...), d.limits, d.specs)
}

// run performs n random operations, then ends every request and checks all are accounted for.
func (d *driver) run(n int) {
	for d.step = 0; d.step < n && !d.src.done(); d.step++ {
		if traceOn {
			defer func(step int) { _ = step }(d.step)
		}
		switch op := d.src.intn(28 + btoi(d.addModels)); {
		case op < 7:
			d.arrive()
		case op < 13:
			d.finish()
		case op < 15:
			d.cancel()
		case op < 19:
			d.advance()
		case op < 20:
			d.setLanes()
		case op < 21:
			d.batch()
		case op < 22:
			d.requeue()
		case op < 24:
			d.retry()
		case op < 25:
			d.correct()
		case op < 26:
			d.keyRefused()
		case op < 27:
			d.setStartCap()
		case op < 28:
			d.setModelLanes()
		default:
			d.addModel()
		}
		if traceOn {
			d.t.Logf("step %d: %s", d.step, d.last)
		}
		d.checkInvariants()
	}
	d.drain()
}

// pickID returns a random id the driver has seen in state want (or one never used), for
// ops that must also cope with ids in the wrong state.
func (d *driver) pickID(want fate) ID {
	var c []ID
	for id, f := range d.fates {
		if f == want {
			c = append(c, id)
		}
	}
	if len(c) == 0 || d.src.intn(8) == 0 {
		return ID(d.src.intn(int(d.nextID) + 2))
	}
	slices.Sort(c) // map order is random; the source must decide
	return c[d.src.intn(len(c))]
}

// started compares the starts an operation caused with the reference's and records them.
func (d *driver) started(want []ID) {
	d.t.Helper()
	got := d.g.takeStarts()
	if !slices.Equal(ids(got), ids(want)) {
		d.fatalf("started %v, reference %v", got, want)
	}
	for _, id := range got {
		if d.fates[id] != fateQueued {
			d.fatalf("started %d, which the caller saw %v", id, d.fates[id])
		}
		d.fates[id] = fateRunning
		d.stats["dispatched"]++
	}
	if d.g.gaveBack > 0 {
		d.fatalf("%d grants given back at quiescence: the dispatcher's view was wrong", d.g.gaveBack)
	}
}

// testClients are who the property tests' requests are for: the anonymous client and
// named ones of several weights, two of them with a max_running of their own (a client's
// weight and caps stay what they are, as a key's do between reloads).
var testClients = []llm.Client{{}, {Name: "a", MaxRunning: 2}, {Name: "b", Weight: 3}, {Name: "c", Weight: 2, MaxRunning: 1}}

// arrive admits a new request; now and then one that arrived earlier elsewhere (a
// fallback), which takes its place in the FIFO by its arrival.
func (d *driver) arrive() {
	d.nextID++
	id, p := d.nextID, d.src.intn(len(d.specs))
	m, c := d.src.intn(len(d.specs[p].Models)), d.src.intn(llm.NumPriorities)
	cost := []int{0, 1, 40, 150, 900}[d.src.intn(5)]
	var arrived time.Time
	if d.src.intn(6) == 0 {
		arrived = d.now.Add(-time.Duration(d.src.intn(20)) * time.Second)
		d.stats["arrived earlier"]++
	}
	cl := testClients[d.src.intn(len(testClients))]
	d.last = fmt.Sprintf("arrive %d p%d m%d c%d cost %d client %q arrived %v", id, p, m, c, cost, cl.Name, arrived.Sub(t0))
	o, k := d.g.Enter(id, p, Arrival{Model: m, Class: llm.Priority(c), Tokens: cost, Client: cl, Arrived: arrived}, d.now)
	wo, wk, others := d.ref.arrive(id, p, m, c, cost, cl, arrived, d.now)
	if o != wo || (o == Rejected && k != wk) {
		d.fatalf("Arrive = %v %v, reference %v %v", o, k, wo, wk)
	}
	if o == Rejected {
		d.stats["rejected "+k.String()]++
	} else {
		d.stats[o.String()]++
	}
	switch o {
	case Started:
		d.fates[id] = fateRunning
	case Queued:
		d.fates[id] = fateQueued
	default:
		d.fates[id] = fateRejected
	}
	d.started(others)
}

func (d *driver) finish() {
	id := d.pickID(fateRunning)
	d.last = fmt.Sprintf("finish %d", id)
	got, want := d.g.Finish(id, d.now), d.ref.finish(id)
	if got != want || got != (d.fates[id] == fateRunning) {
		d.fatalf("Finish = %v, reference %v, caller saw %v", got, want, d.fates[id])
	}
	if got {
		d.fates[id] = fateFinished
	}
	d.started(d.ref.dispatch(d.now))
}

func (d *driver) cancel() {
	id := d.pickID(fateQueued)
	d.last = fmt.Sprintf("cancel %d", id)
	got, want := d.g.Cancel(id, d.now), d.ref.cancel(id)
	if got != want || got != (d.fates[id] == fateQueued) {
		d.fatalf("Cancel = %v, reference %v, caller saw %v", got, want, d.fates[id])
	}
	if got {
		d.fates[id] = fateCancelled
		d.stats["cancelled"]++
	}
	d.started(d.ref.dispatch(d.now))
}

// advance moves the clock, handling every wake-up on the way at its own time, as the
// providers' timers do: expiries first, then what a new token or a freed queue place lets
// start. Both sides must want the same wake-ups.
func (d *driver) advance() {
	step := []time.Duration{0, time.Millisecond, 100 * time.Millisecond, time.Second, 3 * time.Second, 15 * time.Second}
	to := d.now.Add(step[d.src.intn(len(step))])
	d.last = fmt.Sprintf("advance to t0+%v", to.Sub(t0))
	for {
		at, ok := d.g.NextWake(d.now)
		rt, rok := d.ref.wake(d.now)
		full := d.ref.running(-1, -1) >= d.limits.MaxRunning
		switch {
		case !full && (ok != rok || (ok && !at.Equal(rt))):
			d.fatalf("NextWake = %v %v, reference %v %v", at.Sub(t0), ok, rt.Sub(t0), rok)
		case full && rok && (!ok || at.After(rt)):
			d.fatalf("NextWake = %v %v is later than the reference's %v with the global cap full", at.Sub(t0), ok, rt.Sub(t0))
		}
		if !ok || at.After(to) {
			break
		}
		d.now = at
		if !at.Equal(d.minDeadline()) {
			d.stats["wake for a token"]++
		}
		got := d.g.Expire(d.now, d.buf[:0])
		want := d.ref.expire(d.now)
		if !slices.Equal(ids(got), ids(want)) {
			d.fatalf("Expire = %v, reference %v", got, want)
		}
		for _, id := range got {
			if d.fates[id] != fateQueued {
				d.fatalf("expired %d, which the caller saw %v", id, d.fates[id])
			}
			d.fates[id] = fateExpired
			d.stats["expired"]++
		}
		d.started(d.ref.dispatch(d.now))
	}
	d.now = to
}

func (d *driver) minDeadline() time.Time {
	var t time.Time
	for _, q := range d.ref.reqs {
		if q.state == refQueued && (t.IsZero() || q.deadline.Before(t)) {
			t = q.deadline
		}
	}
	return t
}

func (d *driver) setLanes() {
	p := d.src.intn(len(d.specs))
	n := d.src.intn(d.specs[p].Lanes+2) - 1
	d.last = fmt.Sprintf("effective lanes p%d = %d", p, n)
	d.g.SetEffectiveLanes(p, n, d.now)
	d.ref.eff[p] = min(max(n, 0), d.specs[p].Lanes)
	d.started(d.ref.dispatch(d.now))
}

// batch admits 2 to 4 members at once, or none, as SPEC §5's batches do.
func (d *driver) batch() {
	members := make([]batchMember, 2+d.src.intn(3))
	for i := range members {
		d.nextID++
		p := d.src.intn(len(d.specs))
		members[i] = batchMember{id: d.nextID, p: p, m: d.src.intn(len(d.specs[p].Models)), cost: []int{0, 40, 900}[d.src.intn(3)]}
	}
	c := d.src.intn(llm.NumPriorities)
	d.last = fmt.Sprintf("batch %+v c%d", members, c)
	got, blocker := d.g.Batch(members, llm.Priority(c), d.now)
	if want := d.ref.batch(members, c, d.now); got != want {
		d.fatalf("Batch = %v (%v), reference %v", got, blocker, want)
	}
	if blocker == BlockedByQueue {
		d.fatalf("a batch was held back by a queue at quiescence, where nothing waiting could start")
	}
	for _, mb := range members {
		if got {
			d.fates[mb.id] = fateRunning
		} else {
			d.fates[mb.id] = fateRejected
		}
	}
	d.stats[fmt.Sprintf("batch started %v", got)]++
	if d.g.released > 0 {
		d.stats["batch released"] += d.g.released
		d.g.released = 0
	}
}

// requeue sends a running request back to its queue, as a capacity refusal does.
func (d *driver) requeue() {
	id := d.pickID(fateRunning)
	d.nextID++
	next := d.nextID
	d.last = fmt.Sprintf("requeue %d as %d", id, next)
	got := d.g.Requeue(id, next, d.now)
	starts, want := d.ref.requeue(id, next, d.now)
	if got != want || got != (d.fates[id] == fateRunning) {
		d.fatalf("Requeue = %v, reference %v, caller saw %v", got, want, d.fates[id])
	}
	if got {
		d.fates[id], d.fates[next] = fateFinished, fateQueued
		d.stats["requeued"]++
	} else {
		d.fates[next] = fateRejected // the id is spent either way
	}
	d.started(starts)
}

// retry is a running request's next attempt: both sides must pick the same key, or none.
func (d *driver) retry() {
	id := d.pickID(fateRunning)
	skip := d.src.intn(3) - 1 // a key the call already tried, or none
	tried := func(i int) bool { return i == skip }
	d.last = fmt.Sprintf("retry %d (tried %d)", id, skip)
	key, ok := d.g.ps[d.whereOf(id)].RetryKey(id, d.now, tried)
	wkey, wok := d.ref.retryKey(id, d.now, tried)
	if ok != wok || ok && key != wkey {
		d.fatalf("RetryKey = %d %v, reference %d %v", key, ok, wkey, wok)
	}
	if !ok || d.src.intn(4) == 0 { // none, or the provider decides not to retry: no turn moves
		return
	}
	d.stats["retried"]++
	p := d.whereOf(id)
	d.g.change(p, d.now, func(pr *Provider) { pr.Retry(id, key, d.now) })
	d.ref.retry(id, key, d.now)
	d.started(d.ref.dispatch(d.now))
}

// whereOf is the provider of a live request (0 for an unknown one, whose operations fail).
func (d *driver) whereOf(id ID) int { return d.g.where[id] }

// correct reports a running request's real usage.
func (d *driver) correct() {
	id := d.pickID(fateRunning)
	actual := d.src.intn(300)
	d.last = fmt.Sprintf("correct %d used %d", id, actual)
	d.g.change(d.whereOf(id), d.now, func(pr *Provider) { pr.Correct(id, actual, d.now) })
	d.ref.correct(id, actual, d.now)
	d.started(d.ref.dispatch(d.now))
}

// keyRefused is what the backend says of a key a call of model m used: rate-limited for a
// hint, or refused (the key, or the key for m alone), or what the owner records of the key's
// probe: a call that starts as the probe, and its end.
func (d *driver) keyRefused() {
	p := d.src.intn(len(d.specs))
	m := d.src.intn(len(d.specs[p].Models))
	pl := d.ref.pool(p, m)
	key := d.src.intn(d.ref.rings[p][pl].Len())
	hint := time.Duration(d.src.intn(4)) * 1500 * time.Millisecond
	op, scope, probe := "cooling", keys.WholeKey, d.src.intn(2) == 0
	switch d.src.intn(40) {
	case 0:
		op = "set aside"
	case 1:
		op, scope = "set aside for the model", keys.OneModel
	case 2, 3:
		op = "probe"
	case 4:
		op = "probe succeeded"
	case 5:
		op = "probe ended"
	}
	d.last = fmt.Sprintf("key p%d m%d pool %d key %d: %s, hint %v, probe %v", p, m, pl, key, op, hint, probe)
	apply := func(ring *keys.Ring) {
		switch op {
		case "cooling":
			ring.RateLimited(key, hint, d.now)
		case "probe":
			ring.Began(key, m, d.now)
		case "probe succeeded":
			ring.ProbeSucceeded(key, m)
		case "probe ended":
			ring.ProbeEnded(key, m)
		default:
			ring.Refused(key, m, scope, "refused", probe, d.now)
		}
	}
	d.g.change(p, d.now, func(*Provider) { apply(d.specs[p].Keys[pl].Ring) })
	apply(d.ref.rings[p][pl])
	d.stats["key "+op]++
	d.started(d.ref.dispatch(d.now))
}

// setStartCap is the breaker: no starts, one probe, or none held back.
func (d *driver) setStartCap() {
	p := d.src.intn(len(d.specs))
	n := d.src.intn(3) - 1
	d.last = fmt.Sprintf("start cap p%d = %d", p, n)
	d.g.change(p, d.now, func(pr *Provider) { pr.Lanes().SetStartCap(n) })
	d.ref.caps[p] = n
	d.started(d.ref.dispatch(d.now))
}

// setModelLanes is a model learning its own lanes.
func (d *driver) setModelLanes() {
	p := d.src.intn(len(d.specs))
	m := d.src.intn(len(d.specs[p].Models))
	n := d.src.intn(d.specs[p].Models[m].Lanes+2) - 1
	d.last = fmt.Sprintf("model lanes p%d m%d = %d", p, m, n)
	d.g.change(p, d.now, func(pr *Provider) { pr.Lanes().SetEffectiveModel(m, n) })
	d.ref.meff[[2]int{p, m}] = min(max(n, 0), d.specs[p].Models[m].Lanes)
	d.started(d.ref.dispatch(d.now))
}

// checkInvariants compares the counts and checks every cap.
func (d *driver) checkInvariants() {
	d.t.Helper()
	s := d.g.Snapshot()
	if s.Running != d.ref.running(-1, -1) || s.Queued != d.ref.queued(-1, -1) {
		d.fatalf("totals running %d queued %d, reference %d %d", s.Running, s.Queued, d.ref.running(-1, -1), d.ref.queued(-1, -1))
	}
	// Without credit the dispatcher counts what runs; with it, a provider's credit counts
	// whole (countedRunning is the providers' running without credit).
	if d.g.d.Running() != d.g.countedRunning() || d.g.d.Queued() != s.Queued {
		d.fatalf("the dispatcher counts running %d queued %d, the providers %d %d (credit counted: %d)", d.g.d.Running(), d.g.d.Queued(), s.Running, s.Queued, d.g.countedRunning())
	}
	if err := d.g.creditErr(); err != nil {
		d.fatalf("%v", err)
	}
	// A capacity requeue turns a running request into a queued one: admitted already, it is
	// not held to max_admitted or queue_length again.
	requeued := d.ref.count(func(q *refReq) bool { return q.state == refQueued && q.requeued })
	if s.Running > d.limits.MaxRunning || s.Queued > d.limits.MaxAdmitted+requeued {
		d.fatalf("global cap exceeded: %+v", s)
	}
	// A client never runs more than its max_running, across every provider; the slots
	// count exactly what runs.
	for _, cl := range testClients {
		n := d.ref.count(func(q *refReq) bool { return q.state == refRunning && q.client == cl.Name })
		if cl.MaxRunning > 0 && (n > cl.MaxRunning || d.g.slots.Running(cl.Name) != n) {
			d.fatalf("client %q runs %d (slots count %d), max_running %d", cl.Name, n, d.g.slots.Running(cl.Name), cl.MaxRunning)
		}
		if cl.MaxRunning > 0 && n == cl.MaxRunning && d.ref.count(func(q *refReq) bool { return q.state == refQueued && q.client == cl.Name }) > 0 {
			d.stats["client at max_running with calls waiting"]++
		}
	}
	for p, ps := range s.Providers {
		if ps.Running != d.ref.running(p, -1) || ps.Queued != d.ref.queued(p, -1) || ps.EffectiveLanes != d.ref.eff[p] {
			d.fatalf("provider %d: %+v, reference running %d queued %d eff %d", p, ps, d.ref.running(p, -1), d.ref.queued(p, -1), d.ref.eff[p])
		}
		requeued := d.ref.count(func(q *refReq) bool { return q.p == p && q.state == refQueued && q.requeued })
		if ps.Running > ps.Lanes || ps.Queued > ps.QueueLength+requeued {
			d.fatalf("provider %d cap exceeded: %+v", p, ps)
		}
		for name, n := range ps.Clients {
			of := func(st refState) int {
				return d.ref.count(func(q *refReq) bool { return q.p == p && q.client == name && q.state == st })
			}
			if n.Running != of(refRunning) || n.Queued != of(refQueued) {
				d.fatalf("provider %d client %q: %+v, reference running %d queued %d", p, name, n, of(refRunning), of(refQueued))
			}
		}
		if withSome := d.ref.count(func(q *refReq) bool { return q.p == p && ps.Clients[q.client] == (ClientCounts{}) }); withSome > 0 {
			d.fatalf("provider %d: %d requests of clients its snapshot does not list: %+v", p, withSome, ps.Clients)
		}
		for m, ms := range ps.Models {
			if ms.Running != d.ref.running(p, m) || ms.Queued != d.ref.queued(p, m) || ms.Running > ms.ModelLanes {
				d.fatalf("provider %d model %d: %+v, reference running %d queued %d", p, m, ms, d.ref.running(p, m), d.ref.queued(p, m))
			}
		}
	}
	for range 2 {
		id := ID(d.src.intn(int(d.nextID) + 1))
		got, gok := d.g.Lookup(id)
		want, wok := d.ref.lookup(id)
		if gok != wok || got != want {
			d.fatalf("Lookup(%d) = %+v %v, reference %+v %v", id, got, gok, want, wok)
		}
	}
	p := d.src.intn(len(d.specs))
	cost := d.src.intn(200)
	if got, want := d.g.RetryAfter(p, cost, d.now), d.ref.retryAfter(p, cost, d.now); got != want {
		d.fatalf("RetryAfter(%d, %d) = %v, reference %v", p, cost, got, want)
	}
	// Work-conserving: nothing eligible is left waiting.
	if q := d.ref.pick(d.now); q != nil {
		d.fatalf("request %d still eligible", q.id)
	}
}

// drain ends the session as the owner would at shutdown and checks every request had
// exactly one ending.
func (d *driver) drain() {
	d.last = "drain"
	for id, f := range d.fates {
		switch f {
		case fateRunning:
			if !d.g.Finish(id, d.now) || d.g.Finish(id, d.now) {
				d.fatalf("finishing running %d: not exactly once", id)
			}
			d.fates[id] = fateFinished
		case fateQueued:
			// Finishing may have started it meanwhile; then it is finished instead.
			if in, ok := d.g.Lookup(id); ok && in.Running {
				if !d.g.Finish(id, d.now) {
					d.fatalf("finishing %d, started during the drain, failed", id)
				}
			} else if !d.g.Cancel(id, d.now) {
				d.fatalf("cancelling queued %d failed", id)
			}
			d.fates[id] = fateCancelled
		}
	}
	// Requests started during the drain by earlier finishes.
	for _, id := range d.g.takeStarts() {
		if in, ok := d.g.Lookup(id); ok && in.Running {
			d.g.Finish(id, d.now)
		}
	}
	if d.g.Running() != 0 || d.g.Queued() != 0 || d.g.d.Running() != d.g.countedRunning() || d.g.d.Queued() != 0 {
		d.fatalf("after drain running %d queued %d (dispatcher %d %d)", d.g.Running(), d.g.Queued(), d.g.d.Running(), d.g.d.Queued())
	}
	if len(d.fates) != int(d.nextID) {
		d.fatalf("%d ids arrived, %d have a fate", d.nextID, len(d.fates))
	}
}

var traceOn = os.Getenv("TRACE") != ""

func TestProperties(t *testing.T) {
	seeds, steps := 300, 3000
	if testing.Short() {
		seeds, steps = 50, 1000
	}
	stats := map[string]int{}
	for seed := range uint64(seeds) {
		src := randSource{rand.New(rand.NewPCG(seed, 0x70116a7e))}
		d := newDriver(t, src, stats)
		d.run(steps)
	}
	checkCases(t, stats)
}

// TestPropertiesWithCredit is TestProperties with standing credit on (credit.go): every
// decision must still be the reference's, step by step.
func TestPropertiesWithCredit(t *testing.T) {
	seeds, steps := 300, 3000
	if testing.Short() {
		seeds, steps = 50, 1000
	}
	stats := map[string]int{}
	for seed := range uint64(seeds) {
		src := randSource{rand.New(rand.NewPCG(seed, 0xc4ed17))}
		d := newDriver(t, src, stats)
		d.withCredit()
		d.run(steps)
	}
	checkCases(t, stats)
	for _, c := range []string{"started on credit", "credit recalled"} {
		if stats[c] == 0 {
			t.Errorf("no step exercised %q: %v", c, stats)
		}
	}
}

// TestPropertiesContended is TestProperties, with and without standing credit, where calls
// of several clients wait at several providers for max_running: every choice between
// providers by the clients' shares must be the reference's.
func TestPropertiesContended(t *testing.T) {
	seeds, steps := 200, 2000
	if testing.Short() {
		seeds, steps = 40, 1000
	}
	stats := map[string]int{}
	for seed := range uint64(seeds) {
		src := randSource{rand.New(rand.NewPCG(seed, 0x5ba7e5))}
		d := newDriverOf(t, src, stats, contendedConfig)
		if seed%2 == 1 {
			d.withCredit()
		}
		d.ref.stats = stats
		d.run(steps)
	}
	checkCases(t, stats)
	if stats["chosen by shares"] == 0 {
		t.Errorf("no start went to a provider by the clients' shares rather than its turn: %v", stats)
	}
}

// withCredit turns standing credit on, before the first step.
func (d *driver) withCredit() {
	d.g = newCreditComposed(d.limits, d.specs)
	d.g.stats = d.stats
}

// checkCases fails when the random operations never reached one of the cases the property
// tests are for.
func checkCases(t *testing.T, stats map[string]int) {
	t.Helper()
	for _, c := range []string{"started", "queued", "rejected gateway_overloaded",
		"rejected provider_queue_full", "expired", "cancelled", "dispatched", "wake for a token",
		"arrived earlier", "requeued", "retried", "key cooling", "key set aside", "key set aside for the model", "key probe",
		"batch started true", "batch started false", "batch released", "client at max_running with calls waiting"} {
		if stats[c] == 0 {
			t.Errorf("no step exercised %q: %v", c, stats)
		}
	}
	t.Logf("cases: %v", stats)
}

func FuzzGate(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x02\x03\x01\x02\x00\x01\x01\x05\x02\x03\x00\x00\x00\x01\x00\x00\x02\x01\x00\x00"))
	r := rand.New(rand.NewPCG(1, 2))
	for range 8 {
		b := make([]byte, 400)
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d := newDriver(t, &byteSource{b: data}, map[string]int{})
		d.run(len(data))
	})
}

func FuzzGateWithCredit(f *testing.F) {
	f.Add([]byte{})
	r := rand.New(rand.NewPCG(5, 6))
	for range 8 {
		b := make([]byte, 400)
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d := newDriver(t, &byteSource{b: data}, map[string]int{})
		d.withCredit()
		d.run(len(data))
	})
}
