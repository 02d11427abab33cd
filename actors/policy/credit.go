package policy

import (
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// Standing credit (Credit, Recall) takes the grant protocol off an uncontended arrival's
// path. When nothing waits anywhere and the global cap has room, the dispatcher answers a
// provider's offer with a credit: a ceiling on the requests the provider may run without
// asking, a share of max_running's headroom (at most what its lanes could start). The
// dispatcher counts the provider as running the whole ceiling, so max_running holds however
// much of it is used; the provider starts an arrival on credit only when its queue is empty
// and the arrival could start now, which is when a single global dispatcher would start it
// too, and needs no offer for it or for a finish while the credit bounds what it runs.
//
// Any offer gives the credit back. The dispatcher takes credit back (Recall) as soon as it
// needs the exact running count: a request waits for the global cap, a verdict could be
// overloaded, a batch needs slots the credit holds, or the caps changed; it hands out new
// credit only when nothing waits, no verdict is due and no recall is outstanding. So when
// every message is handled, the decisions are those of the protocol without credit.

// room is how many more requests the provider could start at once beyond the simulated
// starts (p.sim, after simulate): its free effective lanes within the start cap.
func (s *simulation) room(l *Lanes) int {
	free := l.free()
	for _, n := range s.avail {
		free -= n
	}
	return max(free, 0)
}

// TakeCredit keeps c, the dispatcher's answer to the provider's last offer, and reports
// whether it did: a credit of another epoch or for an earlier offer is void.
func (p *Provider) TakeCredit(c Credit) bool {
	if c.Epoch != p.epoch || c.Seq != p.offers || c.Ceiling <= 0 {
		return false
	}
	p.credit = c.Ceiling
	return true
}

// Recall takes back the credit the provider holds, if r is for it, and reports whether it
// did: the owner must then offer, which tells the dispatcher. The credit is void from now
// on, not from the offer, so an arrival handled before an offer the owner defers queues
// instead of starting on credit the dispatcher counted under caps it no longer has. False
// when the provider has offered since (it gave it back then).
func (p *Provider) Recall(r Recall) bool {
	if p.credit <= 0 || r.Epoch != p.epoch || r.Seq != p.offers {
		return false
	}
	p.credit = 0
	return true
}

// Quiet reports whether the dispatcher needs no offer from the provider now: it holds
// credit, nothing waits in its queue, and the credit bounds what it runs.
func (p *Provider) Quiet() bool {
	return p.credit > 0 && p.q.n == 0 && p.lanes.running <= p.credit
}

// StartOnCredit starts request id at once on the provider's credit, and returns its key, if
// it can: the provider runs fewer than its credit's ceiling, nothing waits in its queue (so
// the request passes nobody), and the request could start now (lanes, model lanes, start cap,
// keys, rate limiter). Otherwise it changes nothing and reports false; the caller enters the
// request as usual.
func (p *Provider) StartOnCredit(id ID, a Arrival, now time.Time) (Start, bool) {
	if p.lanes.running >= p.credit || p.q.n > 0 {
		return Start{}, false
	}
	if o, _ := p.Enter(id, a, now); o != Queued {
		return Start{}, false
	}
	e := p.q.index[id]
	if p.sim.play(p, now, int(a.Class)) != e || !p.q.claim(e, p.slots, false) {
		p.q.forget(e)
		return Start{}, false
	}
	key, ok := p.limits.pick(&p.q.entries[e], now, nil)
	if !ok {
		p.q.unclaim(e, p.slots)
		p.q.forget(e) // the simulation found a key: unreachable
		return Start{}, false
	}
	p.start(e, key, now)
	p.q.chargeShares(e)
	return Start{ID: id, Key: key}, true
}

// EnableCredit lets the dispatcher hand out standing credit (CreditFor). Without it,
// CreditFor gives none and the dispatcher is the protocol of doc.go alone.
func (d *Dispatcher) EnableCredit() { d.credit = true }

// contrib is what dp counts for in the dispatcher's running total: what it reported plus
// the grants since, or its credit's ceiling if that is more.
func (d *Dispatcher) contrib(dp *dprov) int { return max(dp.running, dp.credit) }

// quiet reports whether nothing waits for the dispatcher: every provider known, no request
// queued, awaiting a verdict or an acknowledgement, nothing the cap holds back, no batch
// holding slots and no credit being recalled.
func (d *Dispatcher) quiet() bool {
	if d.unknown > 0 || d.queued > 0 || d.unanswered > 0 || d.kept > 0 || d.held > 0 || d.recalling > 0 ||
		d.recallWanted || d.avail != [llm.NumPriorities]int{} {
		return false
	}
	for i := range d.provs {
		if d.provs[i].ackDue {
			return false
		}
	}
	return true
}

// CreditFor gives provider p credit with the message the caller is about to send it after a
// dispatch, when the dispatcher is quiet: a ceiling of what p runs (as the dispatcher counts
// it) plus a share of max_running's headroom, at most the room p's offer said it has. Even
// with no headroom or room to add, a ceiling of what p runs lets it start as many again as
// finish, without asking. ok is false when it gives none.
func (d *Dispatcher) CreditFor(p int) (Credit, bool) {
	if !d.credit || p < 0 || p >= len(d.provs) || !d.quiet() {
		return Credit{}, false
	}
	dp := &d.provs[p]
	free := d.limits.MaxRunning - d.running
	if dp.credit > 0 || !dp.known || free < 0 {
		return Credit{}, false // past a lowered cap, a finish must not make room for a start
	}
	add := 0
	if free > 0 {
		add = max(0, min(dp.offer.Room, max(1, free/len(d.provs))))
	}
	if dp.running+add <= 0 {
		return Credit{}, false
	}
	before := d.contrib(dp)
	dp.credit = dp.running + add
	dp.creditSeq = dp.offer.Seq
	d.credited++
	d.running += d.contrib(dp) - before
	return Credit{Provider: p, Epoch: dp.offer.Epoch, Seq: dp.offer.Seq, Ceiling: dp.credit}, true
}

// Credit is the ceiling of the credit the dispatcher counts provider p as holding; 0: none.
func (d *Dispatcher) Credit(p int) int {
	if p < 0 || p >= len(d.provs) {
		return 0
	}
	return d.provs[p].credit
}

// Recalling reports whether credit is being taken back: the dispatcher waits for offers
// that give it back before it can count running exactly.
func (d *Dispatcher) Recalling() bool { return d.recalling > 0 || d.recallWanted }

// Recalls appends to buf a recall for every provider holding credit not yet recalled, when
// the last Dispatch, Verdicts, Hold or SetLimits needed the exact running count.
func (d *Dispatcher) Recalls(buf []Recall) []Recall {
	if !d.recallWanted {
		return buf
	}
	d.recallWanted = false
	for p := range d.provs {
		if dp := &d.provs[p]; dp.credit > 0 && !dp.recalled {
			dp.recalled = true
			d.recalling++
			buf = append(buf, Recall{Provider: p, Epoch: dp.offer.Epoch, Seq: dp.creditSeq})
		}
	}
	return buf
}

// excess is how much the running total may overcount: all that a provider holding credit
// counts for, since it may have finished everything without telling.
func (d *Dispatcher) excess() int {
	n := 0
	for i := range d.provs {
		if dp := &d.provs[i]; dp.credit > 0 {
			n += d.contrib(dp)
		}
	}
	return n
}

// dropCredit forgets dp's credit: its offer gave it back.
func (d *Dispatcher) dropCredit(dp *dprov) {
	if dp.credit == 0 {
		return
	}
	dp.credit = 0
	d.credited--
	if dp.recalled {
		dp.recalled = false
		d.recalling--
	}
}
