package policy

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// reloadRun drives both halves of the policy (the composed harness: offers, grants and
// verdicts delivered as the actors deliver them) through random arrivals, finishes,
// cancellations and reloads that raise and lower every limit, and checks at every start
// that the caps in force at that instant hold, that requests of one model and class start
// in their arrival order across every change, and that a queue refuses newcomers while it
// holds queue_length or more (a lowered one evicting nobody).
type reloadRun struct {
	t      *testing.T
	r      *rand.Rand
	h      *composed
	now    time.Time
	limits Limits
	specs  []ProviderSpec
	order  map[[3]int][]ID // per provider, model, class: queued ids in arrival order
	key    map[ID][3]int
	next   ID
	starts int
	log    []string
}

func (rr *reloadRun) fatalf(format string, args ...any) {
	rr.t.Helper()
	rr.t.Fatalf("%s\nlast steps:\n  %s", fmt.Sprintf(format, args...), joinTail(rr.log, 12))
}

func joinTail(s []string, n int) string {
	if len(s) > n {
		s = s[len(s)-n:]
	}
	out := ""
	for i, x := range s {
		if i > 0 {
			out += "\n  "
		}
		out += x
	}
	return out
}

func randomSpecs(r *rand.Rand) []ProviderSpec {
	specs := make([]ProviderSpec, 2)
	for p := range specs {
		lanes := 1 + r.IntN(3)
		specs[p] = ProviderSpec{Name: fmt.Sprint("p", p), Lanes: lanes, QueueLength: r.IntN(5), QueueTimeout: time.Hour}
		for m := range 2 {
			specs[p].Models = append(specs[p].Models, ModelSpec{Name: fmt.Sprint("m", m), Lanes: 1 + r.IntN(lanes)})
		}
	}
	return specs
}

// onStart checks the caps in force, and the FIFO of the started request's model and class.
func (rr *reloadRun) onStart(p int, id ID) {
	rr.starts++
	total := 0
	for q := range rr.h.ps {
		total += rr.h.ps[q].Lanes().Running()
	}
	snap := rr.h.ps[p].Snapshot()
	k := rr.key[id]
	switch {
	case total > rr.limits.MaxRunning:
		rr.fatalf("start of %d: %d running, max_running in force %d", id, total, rr.limits.MaxRunning)
	case snap.Running > rr.specs[p].Lanes:
		rr.fatalf("start of %d: provider %d runs %d, lanes in force %d", id, p, snap.Running, rr.specs[p].Lanes)
	case snap.Models[k[1]].Running > rr.specs[p].Models[k[1]].Lanes:
		rr.fatalf("start of %d: model %v runs %d, model lanes in force %d", id, k, snap.Models[k[1]].Running, rr.specs[p].Models[k[1]].Lanes)
	case len(rr.order[k]) == 0 || rr.order[k][0] != id:
		rr.fatalf("start of %d out of arrival order in %v: queued %v", id, k, rr.order[k])
	}
	rr.order[k] = rr.order[k][1:]
}

func (rr *reloadRun) arrive() {
	p, m, c := rr.r.IntN(len(rr.specs)), rr.r.IntN(2), rr.r.IntN(llm.NumPriorities)
	rr.next++
	id := rr.next
	k := [3]int{p, m, c}
	rr.key[id] = k
	rr.order[k] = append(rr.order[k], id)
	before := rr.h.ps[p].Queued()
	rr.log = append(rr.log, fmt.Sprintf("arrive %d at %v (queued %d, queue_length %d)", id, k, before, rr.specs[p].QueueLength))
	o, kind := rr.h.Arrive(id, p, m, llm.Priority(c), rr.now)
	switch {
	case o == Rejected:
		rr.order[k] = slices.DeleteFunc(rr.order[k], func(x ID) bool { return x == id })
		if kind == llm.KindQueueFull && before < rr.specs[p].QueueLength {
			rr.fatalf("%d refused queue_full with %d queued, queue_length in force %d", id, before, rr.specs[p].QueueLength)
		}
	case o == Queued && before >= rr.specs[p].QueueLength:
		rr.fatalf("%d queued behind %d, queue_length in force %d", id, before, rr.specs[p].QueueLength)
	}
}

func (rr *reloadRun) finishOrCancel(running bool) {
	var ids []ID
	for id, p := range rr.h.where {
		if in, ok := rr.h.ps[p].Lookup(id); ok && in.Running == running {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return
	}
	slices.Sort(ids)
	id := ids[rr.r.IntN(len(ids))]
	if running {
		rr.log = append(rr.log, fmt.Sprintf("finish %d", id))
		rr.h.Finish(id, rr.now)
		return
	}
	rr.log = append(rr.log, fmt.Sprintf("cancel %d", id))
	k := rr.key[id]
	rr.order[k] = slices.DeleteFunc(rr.order[k], func(x ID) bool { return x == id })
	rr.h.Cancel(id, rr.now)
}

// reload changes one provider's lanes, model lanes and queue length, or the global caps,
// up or down, as a reload does: in place, then the provider (or every one) offers.
func (rr *reloadRun) reload() {
	if rr.r.IntN(3) == 0 {
		mr := 1 + rr.r.IntN(4)
		rr.limits = Limits{MaxRunning: mr, MaxAdmitted: mr + rr.r.IntN(6)}
		rr.log = append(rr.log, fmt.Sprintf("reload caps %+v", rr.limits))
		rr.h.limits = rr.limits
		rr.h.d.SetLimits(rr.limits)
		for p := range rr.h.ps {
			rr.h.report(p, rr.now)
		}
		rr.h.deliver(rr.now)
		return
	}
	p := rr.r.IntN(len(rr.specs))
	ps := rr.specs[p]
	ps.Lanes = 1 + rr.r.IntN(4)
	ps.QueueLength = rr.r.IntN(5)
	ps.Models = slices.Clone(ps.Models)
	for m := range ps.Models {
		ps.Models[m].Lanes = 1 + rr.r.IntN(ps.Lanes)
	}
	rr.specs[p] = ps
	rr.log = append(rr.log, fmt.Sprintf("reload p%d lanes %d queue %d models %+v", p, ps.Lanes, ps.QueueLength, ps.Models))
	rr.h.change(p, rr.now, func(pr *Provider) { pr.Reconfigure(ps, rr.now) })
}

func TestReconfigureProperties(t *testing.T) {
	for seed := range 300 {
		r := rand.New(rand.NewPCG(uint64(seed), 14))
		specs := randomSpecs(r)
		limits := Limits{MaxRunning: 1 + r.IntN(4), MaxAdmitted: 8}
		rr := &reloadRun{t: t, r: r, now: t0, limits: limits, specs: slices.Clone(specs),
			order: map[[3]int][]ID{}, key: map[ID][3]int{}}
		rr.h = newComposed(limits, specs)
		rr.h.onStart = rr.onStart
		reloads := 0
		for range 400 {
			switch op := r.IntN(10); {
			case op < 4:
				rr.arrive()
			case op < 7:
				rr.finishOrCancel(true)
			case op < 8:
				rr.finishOrCancel(false)
			default:
				rr.reload()
				reloads++
			}
			rr.now = rr.now.Add(time.Millisecond)
		}
		for len(rr.h.where) > 0 { // every request admitted ends, in order, under the last settings
			before := len(rr.h.where)
			rr.finishOrCancel(true)
			if len(rr.h.where) == before {
				rr.fatalf("seed %d: %d requests left queued with nothing running", seed, before)
			}
		}
		if rr.starts == 0 || reloads == 0 {
			t.Fatalf("seed %d: a run without starts (%d) or reloads (%d) checks nothing", seed, rr.starts, reloads)
		}
	}
}

func TestReconfigureRateLimitStartsEmpty(t *testing.T) {
	spec := ProviderSpec{Name: "p", Lanes: 4, QueueLength: 4, QueueTimeout: time.Hour, RPM: 60, Burst: 2,
		Models: []ModelSpec{{Name: "m", Lanes: 4}}}
	pr := NewProvider(spec)
	if pr.Limiters().Levels(t0).RPM != 2 {
		t.Fatalf("a new limiter holds its burst: %+v", pr.Limiters().Levels(t0))
	}
	same := spec
	pr.Reconfigure(same, t0)
	if pr.Limiters().Levels(t0).RPM != 2 {
		t.Fatal("an unchanged rate limit lost its tokens")
	}
	spec.RPM = 120
	pr.Reconfigure(spec, t0)
	if lv := pr.Limiters().Levels(t0); lv.RPM != 0 {
		t.Fatalf("a changed rate limit starts empty, got %+v", lv)
	}
	if lv := pr.Limiters().Levels(t0.Add(time.Second)); lv.RPM != 2 {
		t.Fatalf("one second of rpm 120 refills 2: %+v", lv)
	}
}
