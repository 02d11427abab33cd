package policy

import (
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// refGate is a slow, obviously-correct model of the SPEC §2 rules for the property tests:
// one global dispatcher over a flat list of requests, every count recomputed by scanning
// it, every dispatch choice the minimum of an explicit sort key over all eligible requests,
// and the rate limiter kept as a credit of nanoseconds rather than as a theoretical arrival
// time. It dispatches after every event, as the actors do.
type refGate struct {
	limits Limits
	specs  []ProviderSpec
	eff    []int
	reqs   []*refReq // live requests in arrival order
	last   [llm.NumPriorities]int
	seq    int
	credit []time.Duration // per provider: refill time banked, capped at burst intervals
	refill []time.Time     // per provider: when credit was last brought up to date
}

type refState int

const (
	refQueued refState = iota
	refRunning
)

type refReq struct {
	id       ID
	p, m, c  int
	seq      int
	state    refState
	arrived  time.Time
	started  time.Time
	deadline time.Time
}

func newRef(l Limits, specs []ProviderSpec, now time.Time) *refGate {
	r := &refGate{limits: l, specs: specs}
	for _, ps := range specs {
		r.eff = append(r.eff, ps.Lanes)
		r.credit = append(r.credit, refBurst(ps)*refInterval(ps))
		r.refill = append(r.refill, now)
	}
	for c := range r.last {
		r.last[c] = len(specs) - 1
	}
	return r
}

func refInterval(ps ProviderSpec) time.Duration {
	if ps.RPM <= 0 {
		return 0
	}
	return max(time.Minute/time.Duration(ps.RPM), 1)
}

func refBurst(ps ProviderSpec) time.Duration {
	if ps.Burst > 0 {
		return time.Duration(ps.Burst)
	}
	return time.Duration(max(1, ps.RPM/6))
}

// tokenReady brings provider p's credit up to now and reports whether it covers a token.
func (r *refGate) tokenReady(p int, now time.Time) bool {
	iv := refInterval(r.specs[p])
	if iv == 0 {
		return true
	}
	r.credit[p] = min(r.credit[p]+now.Sub(r.refill[p]), refBurst(r.specs[p])*iv)
	r.refill[p] = now
	return r.credit[p] >= iv
}

func (r *refGate) count(match func(q *refReq) bool) int {
	n := 0
	for _, q := range r.reqs {
		if match(q) {
			n++
		}
	}
	return n
}

func (r *refGate) running(p, m int) int {
	return r.count(func(q *refReq) bool {
		return q.state != refQueued && (p < 0 || q.p == p) && (m < 0 || q.m == m)
	})
}

func (r *refGate) queued(p, m int) int {
	return r.count(func(q *refReq) bool {
		return q.state == refQueued && (p < 0 || q.p == p) && (m < 0 || q.m == m)
	})
}

func (r *refGate) find(id ID) (int, *refReq) {
	for i, q := range r.reqs {
		if q.id == id {
			return i, q
		}
	}
	return -1, nil
}

func (r *refGate) remove(id ID) {
	if i, _ := r.find(id); i >= 0 {
		r.reqs = append(r.reqs[:i], r.reqs[i+1:]...)
	}
}

func (r *refGate) eligible(q *refReq, now time.Time) bool {
	return q.state == refQueued &&
		r.running(q.p, -1) < r.eff[q.p] &&
		r.running(q.p, q.m) < r.specs[q.p].Models[q.m].Lanes &&
		r.running(-1, -1) < r.limits.MaxRunning &&
		r.tokenReady(q.p, now)
}

// pick applies the five rules literally: the eligible request with the smallest key
// (class; providers' distance after the class's last served one; its model's running
// count; the arrival of the model's oldest queued request of the class; model; arrival).
func (r *refGate) pick(now time.Time) *refReq {
	np := len(r.specs)
	var best *refReq
	var bestKey [6]int
	for _, q := range r.reqs {
		if !r.eligible(q, now) {
			continue
		}
		oldest := q.seq
		for _, o := range r.reqs {
			if o.state == refQueued && o.p == q.p && o.m == q.m && o.c == q.c && o.seq < oldest {
				oldest = o.seq
			}
		}
		key := [6]int{q.c, (q.p - r.last[q.c] - 1 + np) % np, r.running(q.p, q.m), oldest, q.m, q.seq}
		if best == nil || less(key, bestKey) {
			best, bestKey = q, key
		}
	}
	return best
}

func less(a, b [6]int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

func (r *refGate) start(q *refReq, now time.Time) {
	q.state = refRunning
	q.started = now
	r.last[q.c] = q.p
	if iv := refInterval(r.specs[q.p]); iv > 0 {
		r.credit[q.p] -= iv
	}
}

// arrive enqueues, runs the dispatcher, and rejects (undoing the enqueue) if the newcomer
// did not start, exactly as the package comment states the rules. others are the requests
// that started other than the newcomer, in order.
func (r *refGate) arrive(id ID, p, m, c int, now time.Time) (o Outcome, k llm.Kind, others []ID) {
	r.seq++
	ps := r.specs[p]
	q := &refReq{id: id, p: p, m: m, c: c, seq: r.seq, arrived: now, deadline: now.Add(ps.QueueTimeout)}
	r.reqs = append(r.reqs, q)
	started := false
	for x := r.pick(now); x != nil; x = r.pick(now) {
		r.start(x, now)
		if x == q {
			started = true
			continue
		}
		others = append(others, x.id)
	}
	if started {
		return Started, 0, others
	}
	switch {
	case r.running(-1, -1)+r.queued(-1, -1)-1 >= r.limits.MaxAdmitted:
		r.remove(id)
		return Rejected, llm.KindOverloaded, others
	case r.queued(p, -1)-1 >= ps.QueueLength:
		r.remove(id)
		return Rejected, llm.KindQueueFull, others
	}
	return Queued, 0, others
}

func (r *refGate) dispatch(now time.Time) []ID {
	var out []ID
	for x := r.pick(now); x != nil; x = r.pick(now) {
		r.start(x, now)
		out = append(out, x.id)
	}
	return out
}

func (r *refGate) finish(id ID) bool {
	_, q := r.find(id)
	if q == nil || q.state != refRunning {
		return false
	}
	r.remove(id)
	return true
}

func (r *refGate) cancel(id ID) bool {
	_, q := r.find(id)
	if q == nil || q.state == refRunning {
		return false
	}
	r.remove(id)
	return true
}

// expire returns the expired requests grouped by provider, each group in arrival order.
func (r *refGate) expire(now time.Time) []ID {
	var out []ID
	for p := range r.specs {
		for _, q := range append([]*refReq(nil), r.reqs...) {
			if q.p == p && q.state == refQueued && !q.deadline.After(now) {
				out = append(out, q.id)
				r.remove(q.id)
			}
		}
	}
	return out
}

// wake is NextWake, computed right after a dispatch at now (nothing eligible): the earliest
// deadline, or a token for a provider whose queue only lacks one.
func (r *refGate) wake(now time.Time) (time.Time, bool) {
	var t time.Time
	ok := false
	earlier := func(c time.Time) {
		if !ok || c.Before(t) {
			t, ok = c, true
		}
	}
	for _, q := range r.reqs {
		if q.state == refQueued {
			earlier(q.deadline)
		}
	}
	for p, ps := range r.specs {
		iv := refInterval(ps)
		if iv == 0 || r.running(p, -1) >= r.eff[p] || r.running(-1, -1) >= r.limits.MaxRunning {
			continue
		}
		for m, ms := range ps.Models {
			if r.queued(p, m) > 0 && r.running(p, m) < ms.Lanes {
				r.tokenReady(p, now)
				earlier(now.Add(iv - r.credit[p]))
				break
			}
		}
	}
	return t, ok
}

// retryAfter is the wait until the limiter could start one more request behind the queue.
func (r *refGate) retryAfter(p int, now time.Time) time.Duration {
	iv := refInterval(r.specs[p])
	if iv == 0 {
		return 0
	}
	r.tokenReady(p, now)
	return max(time.Duration(r.queued(p, -1)+1)*iv-r.credit[p], 0)
}

func (r *refGate) lookup(id ID) (gateInfo, bool) {
	_, q := r.find(id)
	if q == nil {
		return gateInfo{}, false
	}
	in := gateInfo{Provider: q.p, Info: Info{Model: q.m, Priority: llm.Priority(q.c), Running: q.state == refRunning,
		Arrived: q.arrived, Deadline: q.deadline}}
	if in.Running {
		in.Started = q.started
	}
	return in, true
}

// batch starts every member at once or none (SPEC §5): only if the global cap and every
// provider's lanes, model lanes and tokens cover the members counted together. A batch
// never passes a waiting request; after a dispatch none could start, so that needs no rule.
func (r *refGate) batch(members []batchMember, c int, now time.Time) bool {
	if r.running(-1, -1)+len(members) > r.limits.MaxRunning {
		return false
	}
	perP, perM := map[int]int{}, map[[2]int]int{}
	for _, mb := range members {
		perP[mb.p]++
		perM[[2]int{mb.p, mb.m}]++
	}
	for p, n := range perP {
		iv := refInterval(r.specs[p])
		if r.running(p, -1)+n > r.eff[p] || (iv > 0 && (!r.tokenReady(p, now) || r.credit[p] < time.Duration(n)*iv)) {
			return false
		}
	}
	for pm, n := range perM {
		if r.running(pm[0], pm[1])+n > r.specs[pm[0]].Models[pm[1]].Lanes {
			return false
		}
	}
	for _, mb := range members {
		r.seq++
		r.reqs = append(r.reqs, &refReq{id: mb.id, p: mb.p, m: mb.m, c: c, seq: r.seq, state: refRunning,
			arrived: now, started: now})
		if iv := refInterval(r.specs[mb.p]); iv > 0 {
			r.credit[mb.p] -= iv
		}
	}
	return true
}
