package policy

import "time"

// An entry is one admitted request, queued or running. Entries live in Provider.entries and
// are linked by index, so queueing and dequeueing never allocate once the slab has grown to
// the provider's size.
type entry struct {
	id    ID
	m     int32 // model index
	class uint8
	state entryState
	// confirmed is set on a queued entry once the dispatcher's verdict kept it (see Verdict).
	confirmed bool
	// reported is the offer that first told the dispatcher of the entry (0: none yet), and
	// mature says the dispatcher has acknowledged it (Ack): only then does it await a verdict.
	reported uint64
	mature   bool
	seq      uint64 // the order entries entered the provider
	cost     int    // estimated tokens, for the tpm buckets
	key      int32  // the key of the running call's last attempt
	// arrived orders the FIFOs: when the request first came (an older request coming back, a
	// capacity requeue or a fallback, takes its place by it), ties broken by seq.
	arrived  time.Time
	started  time.Time
	deadline time.Time
	// links[byModel]: the FIFO of (model, class), by arrival; links[byDeadline]: the
	// provider's deadline order. Only queued entries are linked; a free entry's byModel.next
	// is the free list.
	links [2]link
}

type entryState uint8

const (
	free entryState = iota
	queued
	running
)

const (
	byModel    = 0
	byDeadline = 1
	none       = int32(-1)
)

type link struct{ prev, next int32 }

// list is a doubly linked FIFO of entries through one kind of link.
type list struct {
	head, tail int32
	n          int
}

func newList() list { return list{head: none, tail: none} }

// before reports whether entry a comes before entry b in lists of kind k: by arrival for a
// FIFO, by deadline for the deadline order; ties by the order they entered.
func (p *Provider) before(k int, a, b int32) bool {
	ea, eb := &p.entries[a], &p.entries[b]
	ta, tb := ea.arrived, eb.arrived
	if k == byDeadline {
		ta, tb = ea.deadline, eb.deadline
	}
	if !ta.Equal(tb) {
		return ta.Before(tb)
	}
	return ea.seq < eb.seq
}

// insert links e into l through link kind k at its place in the list's order. A new request
// goes last (its arrival and its deadline are the latest), so the walk from the tail stops at
// once; only a request coming back with an older arrival walks further.
func (p *Provider) insert(l *list, k int, e int32) {
	after := l.tail
	for after != none && p.before(k, e, after) {
		after = p.entries[after].links[k].prev
	}
	lk := &p.entries[e].links[k]
	lk.prev = after
	if after == none {
		lk.next = l.head
		l.head = e
	} else {
		lk.next = p.entries[after].links[k].next
		p.entries[after].links[k].next = e
	}
	if lk.next == none {
		l.tail = e
	} else {
		p.entries[lk.next].links[k].prev = e
	}
	l.n++
}

// unlink removes e, which must be in l, from l.
func (p *Provider) unlink(l *list, k int, e int32) {
	lk := &p.entries[e].links[k]
	if lk.prev == none {
		l.head = lk.next
	} else {
		p.entries[lk.prev].links[k].next = lk.next
	}
	if lk.next == none {
		l.tail = lk.prev
	} else {
		p.entries[lk.next].links[k].prev = lk.prev
	}
	lk.prev, lk.next = none, none
	l.n--
}

// alloc takes an entry from the free list, growing the slab when it is empty.
func (p *Provider) alloc() int32 {
	if p.free == none {
		p.entries = append(p.entries, entry{})
		return int32(len(p.entries) - 1)
	}
	e := p.free
	p.free = p.entries[e].links[byModel].next
	return e
}

// release returns e to the free list and forgets its id.
func (p *Provider) release(e int32) {
	delete(p.index, p.entries[e].id)
	p.entries[e] = entry{state: free, links: [2]link{{none, p.free}, {none, none}}}
	p.free = e
}
