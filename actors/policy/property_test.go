package policy

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// The property tests drive a Gate and the reference model with the same random operations
// and compare every answer, and check the invariants that hold whatever the order.

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
	g      *Gate
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
		for m := range 1 + src.intn(3) {
			ps.Models = append(ps.Models, ModelSpec{Name: fmt.Sprintf("p%d-m%d", p, m), Lanes: rarelyZero(src, 2)})
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

func (d *driver) minDeadline() time.Time {
	var t time.Time
	for _, q := range d.ref.reqs {
		if q.state == refQueued && (t.IsZero() || q.deadline.Before(t)) {
			t = q.deadline
		}
	}
	return t
}

// rarelyZero returns a number in [1, n], or 0 one time in ten: a lane count of zero is
// legal (nothing starts) but should not dominate the runs.
func rarelyZero(src source, n int) int {
	if src.intn(10) == 0 {
		return 0
	}
	return 1 + src.intn(n)
}

func newDriver(t testing.TB, src source, stats map[string]int) *driver {
	l, specs := randomConfig(src)
	return &driver{
		t: t, src: src, now: t0, specs: specs, limits: l,
		g: New(l, specs), ref: newRef(l, specs, t0), fates: map[ID]fate{}, stats: stats,
	}
}

func (d *driver) fatalf(format string, args ...any) {
	d.t.Helper()
	d.t.Fatalf("step %d (%s): %s\nlimits %+v\nproviders %+v", d.step, d.last, fmt.Sprintf(format, args...), d.limits, d.specs)
}

// run performs n random operations, then ends every request and checks all are accounted for.
func (d *driver) run(n int) {
	for d.step = 0; d.step < n && !d.src.done(); d.step++ {
		switch op := d.src.intn(20 + btoi(d.addModels)); {
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
		default:
			d.addModel()
		}
		d.checkInvariants()
	}
	d.drain()
}

// known returns a random id the driver has seen (or one never used), for ops that must
// also cope with ids in the wrong state.
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

func (d *driver) arrive() {
	d.nextID++
	id, p := d.nextID, d.src.intn(len(d.specs))
	m, c := d.src.intn(len(d.specs[p].Models)), d.src.intn(llm.NumPriorities)
	d.last = fmt.Sprintf("arrive %d p%d m%d c%d", id, p, m, c)
	o, k := d.g.Arrive(id, p, m, llm.Priority(c), d.now)
	wo, wk := d.ref.arrive(id, p, m, c, d.now)
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
	d.maybeDispatch()
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
	d.maybeDispatch()
}

func (d *driver) cancel() {
	id := d.pickID(fateQueued)
	d.last = fmt.Sprintf("cancel %d", id)
	got, want := d.g.Cancel(id), d.ref.cancel(id)
	if got != want || got != (d.fates[id] == fateQueued) {
		d.fatalf("Cancel = %v, reference %v, caller saw %v", got, want, d.fates[id])
	}
	if got {
		d.fates[id] = fateCancelled
		d.stats["cancelled"]++
	}
	d.maybeDispatch()
}

// advance moves the clock; usually the owner's wake-up follows (Expire, then Dispatch),
// sometimes not yet, so that arrivals meet refilled rate limiters before a Dispatch.
func (d *driver) advance() {
	step := []time.Duration{0, time.Millisecond, 100 * time.Millisecond, time.Second, 3 * time.Second, 15 * time.Second}
	d.now = d.now.Add(step[d.src.intn(len(step))])
	d.last = fmt.Sprintf("advance to t0+%v", d.now.Sub(t0))
	if d.src.intn(4) == 0 {
		return
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
	d.dispatch()
}

func (d *driver) setLanes() {
	p := d.src.intn(len(d.specs))
	n := d.src.intn(d.specs[p].Lanes+2) - 1
	d.last = fmt.Sprintf("effective lanes p%d = %d", p, n)
	d.g.SetEffectiveLanes(p, n)
	d.ref.eff[p] = min(max(n, 0), d.specs[p].Lanes)
	d.maybeDispatch()
}

// maybeDispatch is the owner's Dispatch after a change, skipped now and then to exercise
// a lagging owner.
func (d *driver) maybeDispatch() {
	if d.src.intn(5) != 0 {
		d.dispatch()
	}
}

func (d *driver) dispatch() {
	got := d.g.Dispatch(d.now, d.buf[:0])
	want := d.ref.dispatch(d.now)
	if !slices.Equal(ids(got), ids(want)) {
		d.fatalf("Dispatch = %v, reference %v", got, want)
	}
	for _, id := range got {
		if d.fates[id] != fateQueued {
			d.fatalf("dispatched %d, which the caller saw %v", id, d.fates[id])
		}
		d.fates[id] = fateRunning
		d.stats["dispatched"]++
	}
	if at, ok := d.g.NextWake(); ok && d.ref.queued(-1, -1) > 0 && at.Before(t0.Add(time.Hour)) {
		d.stats["wake for a token"] += btoi(!at.Equal(d.minDeadline()))
	}
	// Work-conserving: nothing eligible is left waiting.
	if q := d.ref.pick(d.now); q != nil {
		d.fatalf("request %d still eligible after Dispatch", q.id)
	}
	if e := d.g.pick(d.now); e != none {
		d.fatalf("the gate would still start %d after Dispatch", d.g.entries[e].id)
	}
	wt, wok := d.g.NextWake()
	rt, rok := d.ref.wake(d.now)
	if wok != rok || !wt.Equal(rt) {
		d.fatalf("NextWake = %v %v, reference %v %v", wt.Sub(t0), wok, rt.Sub(t0), rok)
	}
}

// checkInvariants compares the counts and checks every cap.
func (d *driver) checkInvariants() {
	d.t.Helper()
	s := d.g.Snapshot()
	if s.Running != d.ref.running(-1, -1) || s.Queued != d.ref.queued(-1, -1) ||
		d.g.Running() != s.Running || d.g.Queued() != s.Queued {
		d.fatalf("totals running %d queued %d, reference %d %d", s.Running, s.Queued, d.ref.running(-1, -1), d.ref.queued(-1, -1))
	}
	if s.Running > d.limits.MaxRunning || s.Queued > d.limits.MaxAdmitted {
		d.fatalf("global cap exceeded: %+v", s)
	}
	for p, ps := range s.Providers {
		if ps.Running != d.ref.running(p, -1) || ps.Queued != d.ref.queued(p, -1) || ps.EffectiveLanes != d.ref.eff[p] {
			d.fatalf("provider %d: %+v, reference running %d queued %d eff %d", p, ps, d.ref.running(p, -1), d.ref.queued(p, -1), d.ref.eff[p])
		}
		if ps.Running > ps.Lanes || ps.Queued > ps.QueueLength {
			d.fatalf("provider %d cap exceeded: %+v", p, ps)
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
	if got, want := d.g.RetryAfter(p, d.now), d.ref.retryAfter(p, d.now); got != want {
		d.fatalf("RetryAfter(%d) = %v, reference %v", p, got, want)
	}
	if len(d.ref.held) > 0 {
		d.stats["held"]++
		if at, ok := d.g.NextWake(); !ok || at.After(d.now) {
			d.fatalf("NextWake = %v %v with requests held", at.Sub(t0), ok)
		}
	}
}

// drain ends the session as the owner would at shutdown and checks every request had
// exactly one ending.
func (d *driver) drain() {
	d.last = "drain"
	d.dispatch()
	for id, f := range d.fates {
		switch f {
		case fateRunning:
			if !d.g.Finish(id, d.now) || d.g.Finish(id, d.now) {
				d.fatalf("finishing running %d: not exactly once", id)
			}
			d.fates[id] = fateFinished
		case fateQueued:
			if !d.g.Cancel(id) {
				d.fatalf("cancelling queued %d failed", id)
			}
			d.fates[id] = fateCancelled
		}
	}
	if d.g.Running() != 0 || d.g.Queued() != 0 {
		d.fatalf("after drain running %d queued %d", d.g.Running(), d.g.Queued())
	}
	if len(d.fates) != int(d.nextID) {
		d.fatalf("%d ids arrived, %d have a fate", d.nextID, len(d.fates))
	}
}

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
	for _, c := range []string{"started", "queued", "rejected gateway_overloaded",
		"rejected provider_queue_full", "held", "expired", "cancelled", "dispatched", "wake for a token"} {
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
