package policy

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tollgate/tollgate/actors/policy/keys"
	"github.com/tollgate/tollgate/providers/llm"
)

// The interleaving tests leave the protocol's messages in flight: events (arrivals,
// finishes, cancellations, timers, changed lanes) come while grants, verdicts and offers
// are on their way, messages are handled in a random order (FIFO per mailbox, as actor
// mailboxes are), and either half crashes now and then, losing the message it was handling
// and rebuilding from its facts. Nothing is compared with the reference: what must hold is
// that no cap is ever exceeded, every request gets exactly one outcome, FIFO order holds
// within a model and class, grants given back are taken back, and whenever the messages
// are all handled the two halves agree and nothing that could start is left waiting.

type ilDriver struct {
	t      testing.TB
	src    source
	now    time.Time
	limits Limits
	specs  []ProviderSpec
	g      *composed
	fates  map[ID]fate
	prov   map[ID]int
	fifo   map[[3]int][]ID // per (provider, model, class): queued ids in arrival order
	key    map[ID][3]int
	nextID ID
	step   int
	last   string
	stats  map[string]int
}

func newILDriver(t testing.TB, src source, stats map[string]int) *ilDriver {
	l, specs := randomConfig(src)
	d := &ilDriver{t: t, src: src, now: t0, limits: l, specs: specs, g: newComposed(l, specs),
		fates: map[ID]fate{}, prov: map[ID]int{}, fifo: map[[3]int][]ID{}, key: map[ID][3]int{}, stats: stats}
	d.g.onStart = d.started
	if traceOn {
		d.g.trace = t.Logf
	}
	d.g.onReject = func(p int, id ID, kind llm.Kind) {
		d.leaveQueue(id, fateRejected)
		d.stats["rejected "+kind.String()]++
	}
	return d
}

func (d *ilDriver) fatalf(format string, args ...any) {
	d.t.Helper()
	d.t.Fatalf("step %d (%s): %s\nlimits %+v\nproviders %+v", d.step, d.last, fmt.Sprintf(format, args...), d.limits, d.specs)
}

// started checks FIFO order within the request's model and class, and records it.
func (d *ilDriver) started(p int, id ID) {
	if d.fates[id] != fateQueued {
		d.fatalf("started %d, which was %v", id, d.fates[id])
	}
	k := d.key[id]
	if q := d.fifo[k]; len(q) == 0 || q[0] != id {
		d.fatalf("started %d out of FIFO order: %v wait in provider %d model %d class %d", id, q, k[0], k[1], k[2])
	}
	d.leaveQueue(id, fateRunning)
	d.stats["started"]++
}

func (d *ilDriver) leaveQueue(id ID, f fate) {
	if d.fates[id] != fateQueued {
		d.fatalf("request %d left the queue (%v) but was %v", id, f, d.fates[id])
	}
	k := d.key[id]
	d.fifo[k] = slices.DeleteFunc(d.fifo[k], func(x ID) bool { return x == id })
	d.fates[id] = f
}

func (d *ilDriver) run(n int) {
	for d.step = 0; d.step < n && !d.src.done(); d.step++ {
		switch op := d.src.intn(34); {
		case op < 6:
			d.arrive()
		case op < 10:
			d.finish()
		case op < 12:
			d.cancel()
		case op < 15:
			d.tick()
		case op < 27:
			d.deliverOne()
		case op < 28:
			d.setLanes()
		case op < 29:
			d.crashProvider()
		case op < 30:
			d.crashDispatcher()
		case op < 31:
			d.limit()
		case op < 32:
			d.keyRefused()
		default:
			d.quiesce()
		}
		if traceOn {
			d.t.Logf("step %d: %s | toSup %d toProv %v | running %v", d.step, d.last, len(d.g.toSup), d.boxLens(), d.runningBy())
		}
		d.checkCaps()
	}
	d.quiesce()
	d.drain()
}

func (d *ilDriver) boxLens() []int {
	var n []int
	for _, q := range d.g.toProv {
		n = append(n, len(q))
	}
	return n
}

func (d *ilDriver) runningBy() []string {
	var out []string
	for _, pr := range d.g.ps {
		out = append(out, fmt.Sprintf("r%d q%d c%d", pr.lanes.running, pr.q.n, pr.q.confirmed))
	}
	return out
}

func (d *ilDriver) arrive() {
	d.nextID++
	id, p := d.nextID, d.src.intn(len(d.specs))
	m, c := d.src.intn(len(d.specs[p].Models)), d.src.intn(llm.NumPriorities)
	d.last = fmt.Sprintf("arrive %d p%d m%d c%d", id, p, m, c)
	d.fates[id], d.prov[id] = fateQueued, p
	key := [3]int{p, m, c}
	d.key[id] = key
	d.fifo[key] = append(d.fifo[key], id)
	if d.g.startOnCredit(p, id, Arrival{Model: m, Class: llm.Priority(c)}, d.now) {
		d.g.settled(p, d.now) // onStart has checked and recorded the start
		return
	}
	if o, k := d.g.ps[p].Enter(id, Arrival{Model: m, Class: llm.Priority(c)}, d.now); o != Queued {
		d.fatalf("Arrive = %v %v", o, k)
	}
	d.g.where[id] = p
	d.g.report(p, d.now)
}

func (d *ilDriver) pick(want fate) (ID, bool) {
	var c []ID
	for id, f := range d.fates {
		if f == want {
			c = append(c, id)
		}
	}
	if len(c) == 0 {
		return 0, false
	}
	slices.Sort(c)
	return c[d.src.intn(len(c))], true
}

func (d *ilDriver) finish() {
	id, ok := d.pick(fateRunning)
	if !ok {
		return
	}
	p := d.prov[id]
	d.last = fmt.Sprintf("finish %d", id)
	if !d.g.ps[p].Finish(id, d.now) {
		d.fatalf("Finish(%d) refused a running request", id)
	}
	d.fates[id] = fateFinished
	d.g.settled(p, d.now)
}

func (d *ilDriver) cancel() {
	id, ok := d.pick(fateQueued)
	if !ok {
		return
	}
	p := d.prov[id]
	d.last = fmt.Sprintf("cancel %d", id)
	if !d.g.ps[p].Cancel(id) {
		d.fatalf("Cancel(%d) refused a queued request", id)
	}
	d.leaveQueue(id, fateCancelled)
	d.stats["cancelled"]++
	d.g.report(p, d.now)
}

// tick moves the clock a little and fires the providers' timers that are due, each on its
// own: expiries, then a fresh offer.
func (d *ilDriver) tick() {
	step := []time.Duration{0, time.Millisecond, 100 * time.Millisecond, time.Second, 5 * time.Second}
	d.now = d.now.Add(step[d.src.intn(len(step))])
	d.last = fmt.Sprintf("tick to t0+%v", d.now.Sub(t0))
	d.fireTimers()
}

func (d *ilDriver) fireTimers() {
	for p, pr := range d.g.ps {
		if w := d.g.armed[p]; !w.ok || w.at.After(d.now) {
			continue
		}
		for _, id := range pr.Expire(d.now, nil) {
			d.leaveQueue(id, fateExpired)
			d.stats["expired"]++
		}
		d.g.report(p, d.now)
	}
}

// deliverOne handles the oldest message of a random mailbox.
func (d *ilDriver) deliverOne() {
	var boxes []int // -1: the dispatcher's
	if len(d.g.toSup) > 0 {
		boxes = append(boxes, -1)
	}
	for p, q := range d.g.toProv {
		if len(q) > 0 {
			boxes = append(boxes, p)
		}
	}
	if len(boxes) == 0 {
		return
	}
	b := boxes[d.src.intn(len(boxes))]
	gave := d.g.gaveBack
	if b < 0 {
		d.last = "deliver to the dispatcher"
		d.g.deliverSup(d.now)
	} else {
		d.last = fmt.Sprintf("deliver to p%d", b)
		d.g.deliverProv(b, d.now, -1)
	}
	if d.g.gaveBack > gave {
		d.stats["grant given back"]++
	}
}

func (d *ilDriver) setLanes() {
	p := d.src.intn(len(d.specs))
	n := d.src.intn(d.specs[p].Lanes+2) - 1
	d.last = fmt.Sprintf("effective lanes p%d = %d", p, n)
	d.g.ps[p].Lanes().SetEffective(n)
	d.g.report(p, d.now)
}

// limit changes what a provider's other limiters allow, as the breaker and learned model
// lanes do, without waiting for what is in flight.
func (d *ilDriver) limit() {
	p := d.src.intn(len(d.specs))
	m := d.src.intn(len(d.specs[p].Models))
	capN, lanes := d.src.intn(3)-1, d.src.intn(d.specs[p].Models[m].Lanes+1)
	d.last = fmt.Sprintf("p%d start cap %d, model %d lanes %d", p, capN, m, lanes)
	d.g.ps[p].Lanes().SetStartCap(capN)
	d.g.ps[p].Lanes().SetEffectiveModel(m, lanes)
	d.g.report(p, d.now)
}

// keyRefused cools or sets aside one of a provider's keys, as the backend tells it.
func (d *ilDriver) keyRefused() {
	p := d.src.intn(len(d.specs))
	ring := d.specs[p].Keys[d.src.intn(len(d.specs[p].Keys))].Ring
	key := d.src.intn(ring.Len())
	d.last = fmt.Sprintf("p%d key %d refused", p, key)
	switch d.src.intn(20) {
	case 0:
		ring.Refused(key, -1, keys.WholeKey, "refused", false, d.now)
	case 1:
		ring.Refused(key, d.src.intn(len(d.specs[p].Models)), keys.OneModel, "refused", false, d.now)
	default:
		ring.RateLimited(key, time.Duration(d.src.intn(3))*time.Second, d.now)
	}
	d.g.report(p, d.now)
	d.stats["key refused"]++
}

// crashProvider makes a provider crash while handling its oldest message, after a random
// number of that message's grants.
func (d *ilDriver) crashProvider() {
	p := d.src.intn(len(d.specs))
	if len(d.g.toProv[p]) == 0 {
		return
	}
	k := d.src.intn(len(d.g.toProv[p][0].grants) + 1)
	d.last = fmt.Sprintf("crash p%d after %d grants", p, k)
	d.g.deliverProv(p, d.now, k)
	d.stats["provider crashed"]++
}

func (d *ilDriver) crashDispatcher() {
	d.last = "crash the dispatcher"
	d.g.rebuildDispatcher()
	d.stats["dispatcher crashed"]++
}

// quiesce handles every message, fires due timers, and checks what must hold when nothing is
// in flight.
func (d *ilDriver) quiesce() {
	d.last = "quiesce"
	for {
		d.g.deliver(d.now)
		d.fireTimers()
		if !d.g.pending() {
			break
		}
	}
	if !d.g.d.Ready() {
		d.fatalf("the dispatcher is not ready with nothing in flight")
	}
	if d.g.d.Due() {
		d.fatalf("the dispatcher has work due with nothing in flight")
	}
	running, queued := d.g.Running(), d.g.Queued()
	// Without credit the dispatcher counts what runs; with it, a provider's credit counts
	// whole (countedRunning is the providers' running without credit).
	if d.g.d.Running() != d.g.countedRunning() || d.g.d.Queued() != queued {
		d.fatalf("the dispatcher counts running %d queued %d, the providers %d %d (credit counted: %d)", d.g.d.Running(), d.g.d.Queued(), running, queued, d.g.countedRunning())
	}
	if err := d.g.creditErr(); err != nil {
		d.fatalf("%v", err)
	}
	for p, pr := range d.g.ps {
		if ids := d.g.unconfirmed(p); len(ids) > 0 {
			d.fatalf("provider %d: %v never got a verdict", p, ids)
		}
		if running < d.limits.MaxRunning {
			if avail := availNow(pr, d.now); avail != [llm.NumPriorities]int{} {
				d.fatalf("provider %d could start %v with the global cap at %d/%d", p, avail, running, d.limits.MaxRunning)
			}
		}
	}
	d.stats["quiesced"]++
}

// checkCaps holds at every step, whatever is in flight.
func (d *ilDriver) checkCaps() {
	d.t.Helper()
	running, confirmed := 0, 0
	for p, pr := range d.g.ps {
		s := pr.Snapshot()
		running += s.Running
		confirmed += pr.q.confirmed
		if s.Running > s.Lanes || pr.q.confirmed > s.QueueLength {
			d.fatalf("provider %d cap exceeded: %+v, %d kept in its queue", p, s, pr.q.confirmed)
		}
		for m, ms := range s.Models {
			if ms.Running > ms.ModelLanes {
				d.fatalf("provider %d model %d: %+v", p, m, ms)
			}
		}
	}
	if running > d.limits.MaxRunning {
		d.fatalf("%d running, max_running %d", running, d.limits.MaxRunning)
	}
	// A verdict keeps a request only while running plus kept, as the dispatcher counts them,
	// is below max_admitted, and that count never counts fewer than there are.
	if confirmed > d.limits.MaxAdmitted {
		d.fatalf("%d kept waiting, max_admitted %d", confirmed, d.limits.MaxAdmitted)
	}
}

// drain ends every request and checks each id had exactly one ending.
func (d *ilDriver) drain() {
	d.last = "drain"
	for {
		id, ok := d.pick(fateRunning)
		if !ok {
			if id, ok = d.pick(fateQueued); !ok {
				break
			}
			p := d.prov[id]
			if !d.g.ps[p].Cancel(id) {
				d.fatalf("cancelling queued %d failed", id)
			}
			d.leaveQueue(id, fateCancelled)
			d.g.report(p, d.now)
			d.g.deliver(d.now)
			continue
		}
		p := d.prov[id]
		if !d.g.ps[p].Finish(id, d.now) || d.g.ps[p].Finish(id, d.now) {
			d.fatalf("finishing running %d: not exactly once", id)
		}
		d.fates[id] = fateFinished
		d.g.settled(p, d.now)
		d.g.deliver(d.now)
	}
	if d.g.Running() != 0 || d.g.Queued() != 0 || d.g.d.Running() != d.g.countedRunning() || d.g.d.Queued() != 0 {
		d.fatalf("after drain running %d queued %d (dispatcher %d %d)", d.g.Running(), d.g.Queued(), d.g.d.Running(), d.g.d.Queued())
	}
	for id := ID(1); id <= d.nextID; id++ {
		switch d.fates[id] {
		case fateFinished, fateRejected, fateExpired, fateCancelled:
		default:
			d.fatalf("request %d ended as %v", id, d.fates[id])
		}
	}
}

func TestInterleavings(t *testing.T) {
	seeds, steps := 300, 3000
	if testing.Short() {
		seeds, steps = 50, 1000
	}
	stats := map[string]int{}
	for seed := range uint64(seeds) {
		src := randSource{rand.New(rand.NewPCG(seed, 0x1e7e))}
		newILDriver(t, src, stats).run(steps)
	}
	checkILCases(t, stats)
}

// TestInterleavingsWithCredit is TestInterleavings with standing credit on (credit.go):
// the caps hold at every step with credit handed out, used, given back and recalled while
// the messages that carry it are in flight and either half crashes.
func TestInterleavingsWithCredit(t *testing.T) {
	seeds, steps := 300, 3000
	if testing.Short() {
		seeds, steps = 50, 1000
	}
	stats := map[string]int{}
	for seed := range uint64(seeds) {
		src := randSource{rand.New(rand.NewPCG(seed, 0xc4ed17))}
		newILDriver(t, src, stats).withCredit().run(steps)
	}
	checkILCases(t, stats)
	for _, c := range []string{"started on credit", "credit recalled"} {
		if stats[c] == 0 {
			t.Errorf("no step exercised %q: %v", c, stats)
		}
	}
}

// withCredit turns standing credit on, before the first step.
func (d *ilDriver) withCredit() *ilDriver {
	g := newCreditComposed(d.limits, d.specs)
	g.onStart, g.onReject, g.trace, g.stats = d.g.onStart, d.g.onReject, d.g.trace, d.stats
	d.g = g
	return d
}

// checkILCases fails when the random operations never reached one of the cases the
// interleaving tests are for.
func checkILCases(t *testing.T, stats map[string]int) {
	t.Helper()
	for _, c := range []string{"started", "rejected gateway_overloaded", "rejected provider_queue_full",
		"expired", "cancelled", "grant given back", "provider crashed", "dispatcher crashed", "quiesced"} {
		if stats[c] == 0 {
			t.Errorf("no step exercised %q: %v", c, stats)
		}
	}
	t.Logf("cases: %v", stats)
}

func FuzzProtocol(f *testing.F) {
	f.Add([]byte{})
	r := rand.New(rand.NewPCG(3, 4))
	for range 8 {
		b := make([]byte, 600)
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		newILDriver(t, &byteSource{b: data}, map[string]int{}).run(len(data))
	})
}

func FuzzProtocolWithCredit(f *testing.F) {
	f.Add([]byte{})
	r := rand.New(rand.NewPCG(7, 8))
	for range 8 {
		b := make([]byte, 600)
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		newILDriver(t, &byteSource{b: data}, map[string]int{}).withCredit().run(len(data))
	})
}
