package policy

import (
	"fmt"
	"slices"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// composed runs the two halves as the actors do: a Dispatcher and a Provider per provider,
// exchanging the protocol's values through FIFO mailboxes (one to the dispatcher, one to
// each provider), each side acting on a message exactly as its actor does. With deliver it
// handles every message before returning (quiescence: the actor system with no event
// arriving meanwhile); the interleaving tests instead deliver one message at a time, in an
// order they choose, with events in between.
type composed struct {
	limits Limits
	specs  []ProviderSpec
	d      *Dispatcher
	ps     []*Provider
	sync   uint64 // the dispatcher generation, kept across its rebuilds as the actor does

	toSup  []supMsg
	toProv [][]provMsg

	where map[ID]int // provider of each live request

	// Observations, for the tests: the provider of every grant in the order the dispatcher
	// sent them, and what each provider did with its grants, in order (see takeStarts); the
	// kind each request was rejected with by a verdict; grants given back.
	grantOrder []int
	handled    [][]handledGrant
	announced  map[ID]bool // starts Arrive reported as the newcomer's outcome
	rejected   map[ID]llm.Kind
	gaveBack   int
	released   int // batch reservations released because another provider refused
	// scheduled says the dispatcher's reminder to dispatch is already in its mailbox.
	scheduled bool
	// onStart and onReject, when set, see every start and every verdict's rejection as it
	// happens (the interleaving tests keep their own books with them).
	onStart  func(p int, id ID)
	onReject func(p int, id ID, kind llm.Kind)
	trace    func(format string, args ...any)
	// armed is each provider's timer, as its actor arms it after every message it handles.
	armed []wakeAt
	// credit: the dispatcher hands out standing credit and the providers use it as their
	// actors do (credit.go); early are the requests started on it other than newcomers,
	// which takeStarts reports first.
	credit bool
	early  []ID
	stats  map[string]int // when set, counts the starts on credit and the recalls
	// slots are the clients' running calls gateway-wide, shared by every provider; freed says
	// a capped client's room came or went, so every provider offers again, as the actors' do.
	slots *Slots
	freed bool
	// shares are the clients' service at max_running, shared by the dispatcher (and any
	// dispatcher rebuilt after it) and every provider.
	shares *Shares
}

type wakeAt struct {
	at time.Time
	ok bool
}

// supMsg is a provider's offer; or, with dispatch set, the dispatcher's own reminder to
// dispatch.
type supMsg struct {
	p        int
	offer    Offer
	dispatch bool
}

// provMsg is what the dispatcher sends a provider: grants, then verdicts, then an ack; or a
// resync.
type provMsg struct {
	grants   []Grant
	verdicts []Verdict
	ack      *Ack
	credit   *Credit
	resync   uint64  // > 0: a rebuilt dispatcher's request for a fresh offer
	recall   *Recall // alone in its message
}

type handledGrant struct {
	id ID
	ok bool // started id; false: given back
}

func newComposed(l Limits, specs []ProviderSpec) *composed {
	specs = slices.Clone(specs)
	slots, shares := NewSlots(nil), NewShares()
	for i := range specs {
		specs[i].Clients, specs[i].Shares = slots, shares
	}
	h := &composed{limits: l, specs: specs, slots: slots, shares: shares, d: NewDispatcher(l, len(specs)), where: map[ID]int{},
		rejected: map[ID]llm.Kind{}, toProv: make([][]provMsg, len(specs)),
		handled: make([][]handledGrant, len(specs)), announced: map[ID]bool{}, armed: make([]wakeAt, len(specs))}
	h.d.SetClients(slots, shares)
	for _, ps := range specs {
		h.ps = append(h.ps, NewProvider(ps))
	}
	slots.changed = func(string) { h.freed = true }
	return h
}

// wakeFreed has every provider offer again if a capped client's room came or went.
func (h *composed) wakeFreed(now time.Time) {
	if h.freed {
		h.freed = false
		for p := range h.ps {
			h.report(p, now)
		}
	}
}

// newCreditComposed is newComposed with standing credit on, as the actors run it.
func newCreditComposed(l Limits, specs []ProviderSpec) *composed {
	h := newComposed(l, specs)
	h.credit = true
	h.d.EnableCredit()
	return h
}

// sendRecalls sends the recalls the dispatcher wants.
func (h *composed) sendRecalls() {
	for _, r := range h.d.Recalls(nil) {
		h.toProv[r.Provider] = append(h.toProv[r.Provider], provMsg{recall: &r})
		h.count("credit recalled")
	}
}

// settled is what a provider's actor does after a change that its credit may cover: it
// offers unless the dispatcher needs no offer (Quiet).
func (h *composed) settled(p int, now time.Time) {
	if h.credit && h.ps[p].Quiet() {
		h.arm(p, now)
		return
	}
	h.report(p, now)
}

// countedRunning is what the dispatcher must count as running when nothing is in flight:
// each provider's running, or the ceiling of the credit the dispatcher counts it holding.
func (h *composed) countedRunning() int {
	n := 0
	for p, pr := range h.ps {
		if c := h.d.Credit(p); c > 0 {
			n += c
		} else {
			n += pr.Lanes().Running()
		}
	}
	return n
}

// creditErr says what is wrong with the credit when nothing is in flight: a provider holding
// credit the dispatcher does not count, or running past it.
func (h *composed) creditErr() error {
	for p, pr := range h.ps {
		c := h.d.Credit(p)
		switch {
		case pr.credit != 0 && pr.credit != c:
			return fmt.Errorf("provider %d holds credit %d, the dispatcher counts %d", p, pr.credit, c)
		case c > 0 && pr.Lanes().Running() > c:
			return fmt.Errorf("provider %d runs %d on credit %d", p, pr.Lanes().Running(), c)
		}
	}
	return nil
}

// availNow is what provider pr could start now if granted, without making an offer (which
// would give back its credit).
func availNow(pr *Provider, now time.Time) [llm.NumPriorities]int {
	pr.sim.play(pr, now, -1)
	return pr.sim.avail
}

// report is a provider's offer to the dispatcher.
func (h *composed) report(p int, now time.Time) {
	h.toSup = append(h.toSup, supMsg{p: p, offer: h.ps[p].Offer(now)})
	h.arm(p, now)
}

// arm sets provider p's timer for its next wake-up after now.
func (h *composed) arm(p int, now time.Time) {
	at, ok := h.ps[p].NextWake(now)
	h.armed[p] = wakeAt{at, ok}
}

// pending reports whether any message is in flight.
func (h *composed) pending() bool {
	if len(h.toSup) > 0 {
		return true
	}
	for _, q := range h.toProv {
		if len(q) > 0 {
			return true
		}
	}
	return false
}

// deliver handles every message in flight, the dispatcher's mailbox first at each turn.
func (h *composed) deliver(now time.Time) {
	for h.pending() {
		if len(h.toSup) > 0 {
			h.deliverSup(now)
			continue
		}
		for p := range h.toProv {
			if len(h.toProv[p]) > 0 {
				h.deliverProv(p, now, -1)
				h.wakeFreed(now) // a grant took a capped client's last slot
				break
			}
		}
	}
}

// deliverSup handles the dispatcher's oldest message as the supervisor actor does. An offer
// is taken in, and a dispatch is scheduled after whatever else is already in the mailbox,
// so that offers made at the same moment are dispatched together. The dispatch grants what
// can start, then gives the verdicts on the arrivals the offers list. A dispatcher that is
// not ready yet (rebuilt, waiting for every provider's fresh offer) schedules nothing
// until it is.
func (h *composed) deliverSup(now time.Time) {
	m := h.toSup[0]
	h.toSup = h.toSup[1:]
	if !m.dispatch {
		h.d.Report(m.p, m.offer)
		if h.d.Due() && !h.scheduled {
			h.scheduled = true
			h.toSup = append(h.toSup, supMsg{dispatch: true})
		}
		return
	}
	h.scheduled = false
	out := make([]provMsg, len(h.ps))
	for _, g := range h.d.Dispatch(nil) {
		out[g.Provider].grants = append(out[g.Provider].grants, g)
		h.grantOrder = append(h.grantOrder, g.Provider)
	}
	for _, v := range h.d.Verdicts(nil) {
		if h.trace != nil {
			h.trace("verdict %+v", v)
		}
		out[v.Provider].verdicts = append(out[v.Provider].verdicts, v)
	}
	for _, a := range h.d.Acks(nil) {
		out[a.Provider].ack = &a
	}
	for p, pm := range out {
		if len(pm.grants) > 0 || len(pm.verdicts) > 0 || pm.ack != nil {
			if c, ok := h.d.CreditFor(p); ok {
				pm.credit = &c
			}
			h.toProv[p] = append(h.toProv[p], pm)
		}
	}
	h.sendRecalls()
}

// deliverProv handles provider p's oldest message as the provider actor does. With
// crashAfter ≥ 0 the provider crashes after handling that many of its grants: the rest of
// the message is lost and the provider is rebuilt from its facts.
func (h *composed) deliverProv(p int, now time.Time, crashAfter int) {
	m := h.toProv[p][0]
	h.toProv[p] = h.toProv[p][1:]
	pr := h.ps[p]
	if m.resync > 0 {
		pr.Resync(m.resync)
		h.report(p, now)
		return
	}
	if m.recall != nil {
		if pr.Recall(*m.recall) {
			h.report(p, now)
		}
		return
	}
	changed := false
	for i, g := range m.grants {
		if i == crashAfter {
			for range m.grants[i:] { // lost with the crash
				h.handled[p] = append(h.handled[p], handledGrant{})
			}
			h.rebuildProvider(p, now)
			return
		}
		st, again, ok := pr.Grant(g, now)
		id := st.ID
		h.handled[p] = append(h.handled[p], handledGrant{id, ok})
		changed = changed || again
		if ok && h.onStart != nil {
			h.onStart(p, id)
		}
		if !ok {
			h.gaveBack++
			changed = true
		}
	}
	if crashAfter >= 0 {
		h.rebuildProvider(p, now)
		return
	}
	for _, v := range m.verdicts {
		kind, gone := pr.Verdict(v)
		if !gone && !v.removes() {
			// A moot verdict to keep counted as kept a request that had started: say so.
			if in, _ := pr.Lookup(v.ID); in.Running {
				changed = true
			}
		}
		if gone {
			h.rejected[v.ID] = kind
			delete(h.where, v.ID)
			if h.onReject != nil {
				h.onReject(p, v.ID, kind)
			}
		}
		// A removing verdict took the request out of the dispatcher's count; when it had
		// started meanwhile, the dispatcher must hear that it still counts.
		changed = changed || gone || v.removes()
	}
	if m.ack != nil && pr.Ack(*m.ack) > 0 {
		changed = true // the requests it matured await their verdicts: list them
	}
	switch {
	case changed:
		h.report(p, now)
	case m.credit != nil:
		pr.TakeCredit(*m.credit)
	}
	h.arm(p, now)
}

// unconfirmed lists provider p's queued requests still awaiting a verdict, in arrival order.
func (h *composed) unconfirmed(p int) []ID {
	pr := h.ps[p]
	var ids []ID
	for e := pr.q.deadlines.head; e != none; e = pr.q.entries[e].links[byDeadline].next {
		if !pr.q.entries[e].confirmed {
			ids = append(ids, pr.q.entries[e].id)
		}
	}
	return ids
}

// rebuildProvider replaces provider p by one rebuilt from the facts its actor keeps (what
// runs on its lanes; what waits, with its place, deadline and verdict; the key rings, which
// the spec hands the new provider as it did the old; and what the actor decided of lanes and
// starts), at a new epoch, and has it report with the arrivals whose verdict it never got.
func (h *composed) rebuildProvider(p int, now time.Time) {
	old := h.ps[p]
	nw := NewProvider(h.specs[p])
	for range len(old.models) - len(nw.models) {
		nw.AddModel(ModelSpec{}) // models added at runtime: the facts name them too
	}
	for i := range old.models {
		nw.models[i], nw.lanes.models[i].lanes, nw.limits.poolOf[i] = old.models[i], old.lanes.models[i].lanes, old.limits.poolOf[i]
		nw.Lanes().SetEffectiveModel(i, old.lanes.models[i].eff)
	}
	nw.Lanes().SetEffective(old.lanes.eff)
	nw.Lanes().SetStartCap(old.lanes.startCap)
	for i := range old.q.entries {
		if en := &old.q.entries[i]; en.state == running {
			mb := Member{ID: en.id, Model: int(en.m), Class: llm.Priority(en.class), Tokens: en.cost,
				Client: llm.Client{Name: old.q.clients[en.client].name, Weight: old.q.clients[en.client].share,
					MaxRunning: old.q.clients[en.client].maxRun}}
			nw.Resume(mb, en.started, int(en.key))
		}
	}
	for e := old.q.deadlines.head; e != none; e = old.q.entries[e].links[byDeadline].next {
		en := &old.q.entries[e]
		cl := llm.Client{Name: old.q.clients[en.client].name, Weight: old.q.clients[en.client].share,
			MaxRunning: old.q.clients[en.client].maxRun}
		nw.Enter(en.id, Arrival{Model: int(en.m), Class: llm.Priority(en.class), Tokens: en.cost, Client: cl,
			Arrived: en.arrived, Deadline: en.deadline, Confirmed: en.confirmed, Reported: true}, now)
	}
	nw.Rebuilt(now, old.Epoch()+1, old.sync)
	h.ps[p] = nw
	h.report(p, now)
}

// rebuildDispatcher replaces the dispatcher by a new one that forgets every provider, as the
// supervisor does after a crash, and asks each provider for a fresh offer. The message it
// was handling is lost.
func (h *composed) rebuildDispatcher() {
	if len(h.toSup) > 0 {
		h.toSup = h.toSup[1:]
	}
	h.sync++
	h.d = NewDispatcher(h.limits, len(h.ps))
	h.d.SetClients(h.slots, h.shares)
	if h.credit {
		h.d.EnableCredit()
	}
	h.d.Forget(h.sync)
	h.scheduled = false
	for i := 0; i < len(h.toSup); i++ { // its reminder to itself is lost with it
		if h.toSup[i].dispatch {
			h.toSup = append(h.toSup[:i], h.toSup[i+1:]...)
			i--
		}
	}
	for p := range h.ps {
		h.toProv[p] = append(h.toProv[p], provMsg{resync: h.sync})
	}
}

// takeStarts returns the requests started since the last call, in the order the dispatcher
// granted their starts (which is the order a single global dispatcher would have started
// them), leaving out the newcomers Arrive already reported. Grants not handled yet stay
// for a later call.
func (h *composed) takeStarts() []ID {
	out := h.early
	h.early = nil
	n := 0
	for _, p := range h.grantOrder {
		if len(h.handled[p]) == 0 {
			break
		}
		g := h.handled[p][0]
		h.handled[p] = h.handled[p][1:]
		n++
		if g.ok && !h.announced[g.id] {
			out = append(out, g.id)
		}
		delete(h.announced, g.id)
	}
	h.grantOrder = h.grantOrder[:copy(h.grantOrder, h.grantOrder[n:])]
	return out
}

// The Gate-like operations the table and property tests drive; each delivers every message
// before it returns.

// Arrive admits id and reports the newcomer's outcome. Other requests that started meanwhile
// are reported by the next takeStarts.
func (h *composed) Arrive(id ID, p, m int, prio llm.Priority, now time.Time) (Outcome, llm.Kind) {
	return h.Enter(id, p, Arrival{Model: m, Class: prio}, now)
}

// Finish releases a running request.
func (h *composed) Finish(id ID, now time.Time) bool {
	p, ok := h.where[id]
	if !ok || !h.ps[p].Finish(id, now) {
		return false
	}
	delete(h.where, id)
	h.settled(p, now)
	h.wakeFreed(now)
	h.deliver(now)
	return true
}

// Cancel removes a queued request.
func (h *composed) Cancel(id ID, now time.Time) bool {
	p, ok := h.where[id]
	if !ok || !h.ps[p].Cancel(id) {
		return false
	}
	delete(h.where, id)
	h.report(p, now)
	h.deliver(now)
	return true
}

// Expire is every provider's wake-up at now, at once: each expires what is due and reports
// afresh (a token may have come too); the expired requests are returned by provider.
func (h *composed) Expire(now time.Time, buf []ID) []ID {
	for p, pr := range h.ps {
		n := len(buf)
		buf = pr.Expire(now, buf)
		for _, id := range buf[n:] {
			delete(h.where, id)
		}
		h.report(p, now)
	}
	h.deliver(now)
	return buf
}

// Dispatch is every provider's wake-up at now (a token may have come): each reports afresh,
// and the starts since the last call are returned.
func (h *composed) Dispatch(now time.Time) []ID {
	for p := range h.ps {
		h.report(p, now)
	}
	h.deliver(now)
	return h.takeStarts()
}

// SetEffectiveLanes changes provider p's usable lanes.
func (h *composed) SetEffectiveLanes(p, n int, now time.Time) {
	if p < 0 || p >= len(h.ps) {
		return
	}
	h.ps[p].Lanes().SetEffective(n)
	h.report(p, now)
	h.deliver(now)
}

// SetMaxRunning changes the global cap and lets the dispatcher act on it.
func (h *composed) SetMaxRunning(n int, now time.Time) {
	h.limits.MaxRunning = n
	h.d.SetLimits(h.limits)
	for p := range h.ps {
		h.report(p, now)
	}
	h.deliver(now)
}

// AddModel adds a model to provider p; -1 for an unknown provider.
func (h *composed) AddModel(p int, ms ModelSpec) int {
	if p < 0 || p >= len(h.ps) {
		return -1
	}
	return h.ps[p].AddModel(ms)
}

// NextWake is the earliest of the providers' own wake-ups, as their actors' timers fire.
// A provider does not know the global cap, so while the cap is full it may wake for a token
// that a single dispatcher would not have woken for: such a wake-up changes no decision.
func (h *composed) NextWake(now time.Time) (time.Time, bool) {
	var t time.Time
	ok := false
	for _, pr := range h.ps {
		if at, pok := pr.NextWake(now); pok && (!ok || at.Before(t)) {
			t, ok = at, true
		}
	}
	return t, ok
}

// Running and Queued are the providers' own totals.
func (h *composed) Running() int {
	n := 0
	for _, pr := range h.ps {
		n += pr.Lanes().Running()
	}
	return n
}

func (h *composed) Queued() int {
	n := 0
	for _, pr := range h.ps {
		n += pr.Queued()
	}
	return n
}

// gateState is the whole gateway's snapshot, as /admin/state shows it.
type gateState struct {
	Running, Queued, MaxRunning, MaxAdmitted int
	Providers                                []ProviderState
}

func (h *composed) Snapshot() gateState {
	s := gateState{Running: h.Running(), Queued: h.Queued(), MaxRunning: h.limits.MaxRunning, MaxAdmitted: h.limits.MaxAdmitted}
	for _, pr := range h.ps {
		s.Providers = append(s.Providers, pr.Snapshot())
	}
	return s
}

// gateInfo is Info with the provider's index.
type gateInfo struct {
	Provider int
	Info
}

func (h *composed) Lookup(id ID) (gateInfo, bool) {
	p, ok := h.where[id]
	if !ok {
		return gateInfo{}, false
	}
	in, ok := h.ps[p].Lookup(id)
	return gateInfo{Provider: p, Info: in}, ok
}

func (h *composed) RetryAfter(p, tokens int, now time.Time) time.Duration {
	if p < 0 || p >= len(h.ps) {
		return 0
	}
	return h.ps[p].Limiters().RetryAfter(tokens, now)
}

// The limiters' operations, each followed by the provider's offer as its actor makes it.

// Enter admits id as Arrive does, with the arrival's cost, place and deadline.
func (h *composed) Enter(id ID, p int, a Arrival, now time.Time) (Outcome, llm.Kind) {
	if p < 0 || p >= len(h.ps) {
		return Rejected, llm.KindModelNotFound
	}
	if _, dup := h.where[id]; dup {
		return Rejected, llm.KindInvalidRequest
	}
	if h.startOnCredit(p, id, a, now) {
		h.settled(p, now)
		h.deliver(now)
		return Started, 0
	}
	if o, k := h.ps[p].Enter(id, a, now); o == Rejected {
		return o, k
	}
	h.where[id] = p
	h.report(p, now)
	h.deliver(now)
	if k, ok := h.rejected[id]; ok {
		delete(h.rejected, id)
		return Rejected, k
	}
	if in, _ := h.ps[p].Lookup(id); in.Running {
		h.announced[id] = true
		return Started, 0
	}
	return Queued, 0
}

// Requeue puts running request id back in its queue as next, at its place and with its
// deadline, admitted already (a capacity refusal: its actor does Finish and Enter in one
// message). It reports false for an id that does not run.
func (h *composed) Requeue(id, next ID, now time.Time) bool {
	p, ok := h.where[id]
	if !ok {
		return false
	}
	pr := h.ps[p]
	in, ok := pr.Lookup(id)
	if !ok || !in.Running {
		return false
	}
	pr.Finish(id, now)
	delete(h.where, id)
	a := Arrival{Model: in.Model, Class: in.Priority, Tokens: in.Tokens, Client: in.Client, Arrived: in.Arrived,
		Deadline: in.Deadline, Confirmed: true}
	if h.startOnCredit(p, next, a, now) {
		h.early = append(h.early, next)
	} else {
		pr.Enter(next, a, now)
		h.where[next] = p
	}
	h.settled(p, now)
	h.wakeFreed(now)
	h.deliver(now)
	return true
}

// startOnCredit starts request id at provider p on its credit, as its actor does with an
// arrival, and reports whether it did.
func (h *composed) startOnCredit(p int, id ID, a Arrival, now time.Time) bool {
	if !h.credit {
		return false
	}
	if _, ok := h.ps[p].StartOnCredit(id, a, now); !ok {
		return false
	}
	h.where[id] = p
	h.count("started on credit")
	if h.onStart != nil {
		h.onStart(p, id)
	}
	return true
}

func (h *composed) count(c string) {
	if h.stats != nil {
		h.stats[c]++
	}
}

// change applies f to provider p, then has it offer.
func (h *composed) change(p int, now time.Time, f func(pr *Provider)) {
	if p < 0 || p >= len(h.ps) {
		return
	}
	f(h.ps[p])
	h.report(p, now)
	h.deliver(now)
}

// batchMember is one member of a batch in the composed harness: its id, provider and model,
// and its estimated tokens.
type batchMember struct {
	id         ID
	p, m, cost int
}

// Batch admits a batch as the actors do (actors/batch.go): the dispatcher holds its global
// slots, each provider reserves its members and reports its offer (the dispatcher then
// gives back the provider's share of the hold), and the batch commits only if every
// provider reserved; otherwise those that did release their members. It reports whether
// the batch started and, when it did not, the first provider's blocker.
func (h *composed) Batch(members []batchMember, class llm.Priority, now time.Time) (bool, Blocker) {
	by := map[int][]Member{}
	var order []int
	for _, mb := range members {
		if _, seen := by[mb.p]; !seen {
			order = append(order, mb.p)
		}
		by[mb.p] = append(by[mb.p], Member{ID: mb.id, Model: mb.m, Class: class, Tokens: mb.cost})
	}
	held := h.d.Hold(len(members))
	for try := 0; !held && h.d.Recalling() && try < 3; try++ {
		// Unused credit may hold the slots: the supervisor asks again once it is back.
		h.sendRecalls()
		h.deliver(now)
		held = h.d.Hold(len(members))
	}
	if !held {
		return false, BlockedElsewhere
	}
	reserved := map[int]*Reservation{}
	blocker, ok := BlockedElsewhere, true
	for _, p := range order {
		// Told no wait, a refused batch keeps no lanes: the reference model has no batch
		// holds, whose rules batchhold_test.go checks on their own.
		r, b, pok := h.ps[p].Reserve(by[p], 0, now)
		if pok {
			reserved[p] = &r
		} else if ok {
			blocker, ok = b, false
		}
		h.d.Report(p, h.ps[p].Offer(now))
		h.d.Unhold(len(by[p]))
		h.arm(p, now)
	}
	for _, p := range order {
		r := reserved[p]
		switch {
		case r == nil:
		case ok:
			for _, id := range r.Members {
				h.where[id] = p
			}
		default:
			h.ps[p].Release(r, now)
			h.released++
			h.report(p, now)
			h.wakeFreed(now)
		}
	}
	if h.d.Due() && !h.scheduled {
		h.scheduled = true
		h.toSup = append(h.toSup, supMsg{dispatch: true})
	}
	h.deliver(now)
	return ok, blocker
}
