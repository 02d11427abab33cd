package policy

import (
	"cmp"
	"slices"

	"github.com/tollgate/tollgate/providers/llm"
)

// Dispatcher is the gateway-wide side of admission: the global caps (max_running and
// max_admitted), class priority across providers, the clients' fair shares of max_running
// (SPEC §18, fairgrants.go) and the providers' round-robin on a tie. It sees each provider
// only through its latest Offer plus the grants it has sent since, and hands out starts
// (Grant) in SPEC §2 order. Provider p is an index the caller chooses, 0 to providers-1.
// See doc.go.
type Dispatcher struct {
	limits     Limits
	provs      []dprov
	lastServed [llm.NumPriorities]int // per class: the provider that class was granted last
	running    int                    // Σ provs.running
	queued     int                    // Σ provs.queued
	avail      [llm.NumPriorities]int // Σ provs.avail
	unknown    int                    // providers that have not reported since Forget
	sync       uint64                 // generation: Forget starts a new one
	unanswered int                    // Σ provs.unanswered
	kept       int                    // Σ provs.kept
	held       int                    // slots Hold took for batches, counted in running
	judge      []Verdict              // Verdicts' scratch list
	shares     *Shares                // the clients' service at max_running (SetClients)
	slots      *Slots                 // the clients' running calls, for their caps (SetClients)
	// inflight counts, per client with a max_running of its own, the grants for it that
	// their providers have not handled yet: the slots do not count them.
	inflight map[string]int

	// Standing credit (credit.go): whether it is handed out, how many providers hold some,
	// how many of them were asked to give it back and have not yet, and whether a recall is
	// due (Recalls).
	credit              bool
	credited, recalling int
	recallWanted        bool
}

// dprov is the dispatcher's view of one provider: its last offer, corrected for the grants
// sent after it. A grant the provider has not handled yet will start one of its queued
// requests, so it counts as running, not as queued, and takes one of its class's Avail.
type dprov struct {
	known   bool
	offer   Offer
	issued  uint64         // grants sent in offer.Epoch
	pending []pendingGrant // those grants not yet seen, oldest first
	// used, per class, is how many of the offer's Heads the pending grants will start.
	used [llm.NumPriorities]int
	// answered are the verdicts sent on requests the provider still listed as pending in
	// its last offer: it has not applied them yet. An overloaded one removes the request, so
	// it is no longer counted as queued.
	answered   []Verdict
	unanswered int  // pending requests of the last offer without a verdict yet
	kept       int  // requests its queue keeps, with the verdicts to keep not yet applied
	ackDue     bool // its last offer reported fresh requests: Acks answers it
	// credit is the ceiling of the credit it holds (0: none), given with the answer to
	// offer creditSeq; recalled: a Recall for it was sent.
	credit    int
	creditSeq uint64
	recalled  bool
	running   int
	queued    int
	avail     [llm.NumPriorities]int
}

// NewDispatcher starts a dispatcher for providers that are all idle at epoch 0, as new
// Providers are.
func NewDispatcher(l Limits, providers int) *Dispatcher {
	d := &Dispatcher{limits: l, provs: make([]dprov, providers), shares: NewShares(), inflight: map[string]int{}}
	for i := range d.provs {
		d.provs[i].known = true
	}
	for c := range d.lastServed {
		d.lastServed[c] = providers - 1 // so the first turn goes to provider 0
	}
	return d
}

// Forget starts generation sync, which must differ from every earlier one: every provider is
// unknown until it reports an offer of that generation (Provider.Resync), and offers of
// other generations are ignored, because they do not count the grants an earlier
// dispatcher may have sent. A dispatcher rebuilt after a crash starts this way. While any provider is unknown, Dispatch grants nothing: the global
// cap cannot be checked without every provider's running count.
func (d *Dispatcher) Forget(sync uint64) {
	d.sync = sync
	for i := range d.provs {
		dp := &d.provs[i]
		if dp.known {
			d.unknown++
		}
		d.retract(dp)
		*dp = dprov{pending: dp.pending[:0], answered: dp.answered[:0]}
	}
	clear(d.inflight)
	d.credited, d.recalling, d.recallWanted = 0, 0, false
}

// SetClients gives the dispatcher the gateway's client state that its providers share
// (ProviderSpec.Clients and Shares): it charges the starts it grants to shares instead of
// a count of its own, and with slots it grants no start for a client at its max_running
// (see Slots). A dispatcher rebuilt after a crash is given the same ones, so the clients'
// shares go on as they were. Nil leaves either as it was.
func (d *Dispatcher) SetClients(slots *Slots, shares *Shares) {
	if shares != nil {
		d.shares = shares
	}
	if slots != nil {
		d.slots = slots
	}
}

// Ready reports whether every provider has reported since the last Forget.
func (d *Dispatcher) Ready() bool { return d.unknown == 0 }

// Known reports whether provider p has reported since the last Forget.
func (d *Dispatcher) Known(p int) bool { return p >= 0 && p < len(d.provs) && d.provs[p].known }

// AddProvider adds an idle provider at epoch 0 and returns its index.
func (d *Dispatcher) AddProvider() int {
	d.provs = append(d.provs, dprov{known: true})
	return len(d.provs) - 1
}

// SetLimits changes the global caps. Lowering them stops nothing already running. Credit
// handed out under the old caps is recalled (Recalls).
func (d *Dispatcher) SetLimits(l Limits) {
	d.limits = l
	d.recallWanted = d.recallWanted || d.credited > 0
}

// Report takes provider p's latest offer. An offer of an older generation is ignored (see
// Forget). An offer of a new epoch voids the grants sent in the old one (the provider
// refuses them); otherwise the grants it has seen are dropped from the pending ones.
func (d *Dispatcher) Report(p int, o Offer) {
	if p < 0 || p >= len(d.provs) || o.Sync != d.sync {
		return
	}
	dp := &d.provs[p]
	d.retract(dp)
	d.dropCredit(dp) // every offer gives the credit back
	if !dp.known {
		dp.known = true
		d.unknown--
	}
	switch {
	case o.Epoch != dp.offer.Epoch || dp.offer.Sync != o.Sync:
		// A rebuilt provider may have lost verdicts in flight: answer its pending afresh.
		dp.issued = 0
		d.handled(dp, len(dp.pending))
		dp.answered = dp.answered[:0]
	case o.Seen > dp.issued-uint64(len(dp.pending)):
		d.handled(dp, min(int(o.Seen-(dp.issued-uint64(len(dp.pending)))), len(dp.pending)))
	}
	dp.offer = o
	// Verdicts the provider has applied are no longer listed; those still listed are in
	// flight, and an overloaded one will take its request out of the queue.
	removed := 0
	dp.kept = o.Kept
	isListed := membership(o.Pending, len(dp.answered), func(id ID) ID { return id })
	dp.answered = slices.DeleteFunc(dp.answered, func(v Verdict) bool {
		listed := isListed(v.ID)
		switch {
		case listed && v.removes():
			removed++
		case listed:
			dp.kept++ // kept by a verdict the provider has not applied yet
		}
		return !listed
	})
	dp.unanswered = len(o.Pending) - len(dp.answered)
	dp.ackDue = o.Fresh > 0
	dp.running = o.Running + len(dp.pending)
	dp.queued = max(0, o.Queued-len(dp.pending)-removed)
	dp.avail = o.Avail
	dp.used = [llm.NumPriorities]int{}
	for _, g := range dp.pending {
		dp.avail[g.class] = max(0, dp.avail[g.class]-1)
		dp.used[g.class]++
	}
	d.running += d.contrib(dp)
	d.queued += dp.queued
	d.unanswered += dp.unanswered
	d.kept += dp.kept
	for c := range d.avail {
		d.avail[c] += dp.avail[c]
	}
}

// Due reports whether Dispatch or Verdicts would send anything: a start some provider could
// make while the global cap has room, or an arrival without its verdict; or Recalls would,
// for a start the cap holds back while credit not yet recalled may be what fills it. The
// supervisor skips a dispatch that is not due.
func (d *Dispatcher) Due() bool {
	if d.unknown > 0 {
		return false
	}
	if d.unanswered > 0 {
		return true
	}
	for i := range d.provs {
		if d.provs[i].ackDue {
			return true
		}
	}
	return (d.running < d.limits.MaxRunning || d.credited > d.recalling) && d.avail != [llm.NumPriorities]int{}
}

// retract takes dp's derived counts out of the totals.
func (d *Dispatcher) retract(dp *dprov) {
	d.running -= d.contrib(dp)
	d.queued -= dp.queued
	d.unanswered -= dp.unanswered
	d.kept -= dp.kept
	for c := range d.avail {
		d.avail[c] -= dp.avail[c]
	}
}

// Dispatch appends to buf the grants to send now, in the order they must be handled: while
// the gateway runs fewer than MaxRunning, the highest class that some provider could start
// is served, by the provider whose next start serves the client with the least service
// (Shares), on a tie the first such provider after the one that class was granted last
// (see next). Each grant is charged to the client it serves.
func (d *Dispatcher) Dispatch(buf []Grant) []Grant {
	if d.unknown > 0 {
		return buf
	}
	for d.running < d.limits.MaxRunning {
		c := 0
		for c < llm.NumPriorities && d.avail[c] == 0 {
			c++
		}
		if c == llm.NumPriorities {
			break
		}
		p := d.next(c)
		if p < 0 {
			break // a client at its cap: its providers' next offers say what they start instead
		}
		dp := &d.provs[p]
		client := d.grant(dp, c)
		dp.avail[c]--
		d.avail[c]--
		before := d.contrib(dp)
		dp.running++
		d.running += d.contrib(dp) - before
		if dp.queued > 0 {
			dp.queued--
			d.queued--
		}
		d.lastServed[c] = p
		buf = append(buf, Grant{Provider: p, Epoch: dp.offer.Epoch, Class: llm.Priority(c), Client: client})
	}
	if d.credited > 0 && d.avail != [llm.NumPriorities]int{} {
		d.recallWanted = true // the cap holds back a start that unused credit may be keeping out
	}
	return buf
}

// Acks appends to buf an acknowledgement for every provider whose last offer reported fresh
// requests. Send each after the grants of the same Dispatch: what they start needs no
// verdict, and the rest the provider lists as pending in its next offer.
func (d *Dispatcher) Acks(buf []Ack) []Ack {
	if d.unknown > 0 {
		return buf
	}
	for p := range d.provs {
		if dp := &d.provs[p]; dp.ackDue {
			dp.ackDue = false
			buf = append(buf, Ack{Provider: p, Epoch: dp.offer.Epoch, Seq: dp.offer.Seq})
		}
	}
	return buf
}

// Verdicts appends to buf a verdict on every request the providers' offers list as pending
// and that has no verdict yet, in ID order across providers: the gateway numbers requests as
// they arrive, so that is arrival order. Call it after Dispatch. SPEC §2's rules in order,
// each counted as at the request's arrival, without it and without the requests still
// awaiting their own verdict (they came after it): overloaded if the gateway's running plus
// kept requests have reached MaxAdmitted, else queue full if its provider's queue already
// keeps queue_length requests, else kept. So a burst of arrivals at several providers is
// judged as the same arrivals one at a time would be. A request Dispatch has granted a start
// is moot, and its provider ignores the verdict; it must then offer again, since the
// dispatcher counted it as kept or removed rather than running.
func (d *Dispatcher) Verdicts(buf []Verdict) []Verdict {
	if d.unknown > 0 || d.unanswered == 0 {
		return buf
	}
	if d.credited > 0 && d.running+d.kept+d.unanswered > d.limits.MaxAdmitted {
		// Unused credit counts as running: a verdict may be overloaded only with the exact
		// count, so the credit is recalled first.
		d.recallWanted = true
		return buf
	}
	d.judge = d.judge[:0]
	for p := range d.provs {
		dp := &d.provs[p]
		// Only verdicts sent before this loop are looked up: the offer lists each id once.
		answered := membership(dp.answered, len(dp.offer.Pending), func(v Verdict) ID { return v.ID })
		for _, id := range dp.offer.Pending {
			if !answered(id) {
				d.judge = append(d.judge, Verdict{Provider: p, Epoch: dp.offer.Epoch, ID: id})
			}
		}
		d.unanswered -= dp.unanswered
		dp.unanswered = 0
	}
	slices.SortFunc(d.judge, func(a, b Verdict) int { return cmp.Compare(a.ID, b.ID) })
	for _, v := range d.judge {
		dp := &d.provs[v.Provider]
		switch {
		case d.running+d.kept >= d.limits.MaxAdmitted:
			v.Overloaded = true
		case dp.kept >= dp.offer.QueueLength:
			v.QueueFull = true
		default:
			dp.kept++
			d.kept++
		}
		if v.removes() && dp.queued > 0 {
			dp.queued--
			d.queued--
		}
		dp.answered = append(dp.answered, v)
		buf = append(buf, v)
	}
	return buf
}

// Hold takes k global slots at once for a batch (SPEC §5), if the gateway runs at most
// MaxRunning - k and every provider is known; it reports whether it did. The slots count as
// running until Unhold gives them back: the batch's providers count their members as running
// in their next offers, and each Unholds its share when its offer is in. When it refuses and
// credit no request may use could be what fills the cap, a recall is due (Recalls): the
// caller asks again once Recalling is false.
func (d *Dispatcher) Hold(k int) bool {
	if d.unknown > 0 || k < 0 || d.running+k > d.limits.MaxRunning {
		if d.unknown == 0 && k >= 0 && d.credited > 0 && d.running-d.excess()+k <= d.limits.MaxRunning {
			d.recallWanted = true // unused credit may hold the slots: ask again once it is back
		}
		return false
	}
	d.running += k
	d.held += k
	return true
}

// Unhold gives back k slots Hold took.
func (d *Dispatcher) Unhold(k int) {
	k = min(k, d.held)
	d.held -= k
	d.running -= k
}

// scanLimit is the most comparisons a membership test over a whole list may cost before the
// list is indexed instead: Report and Verdicts test every entry of one list against another,
// and with thousands of requests awaiting verdicts (a backend slower than its arrivals)
// scanning made them quadratic (docs/benchmarks.md has the profile).
const scanLimit = 256

// membership returns a test for the ids of list, to be asked about n ids: a scan of
// list while that costs at most scanLimit comparisons in all, else a set built once.
func membership[T any](list []T, n int, id func(T) ID) func(ID) bool {
	if len(list)*n <= scanLimit {
		return func(x ID) bool { return slices.ContainsFunc(list, func(t T) bool { return id(t) == x }) }
	}
	set := make(map[ID]struct{}, len(list))
	for _, t := range list {
		set[id(t)] = struct{}{}
	}
	return func(x ID) bool { _, ok := set[x]; return ok }
}

// Running is the number of requests the dispatcher counts as running: every provider's
// last reported running plus the grants sent to it since, or its credit's ceiling if more.
func (d *Dispatcher) Running() int { return d.running }

// Queued is the number of requests the dispatcher counts as waiting.
func (d *Dispatcher) Queued() int { return d.queued }
