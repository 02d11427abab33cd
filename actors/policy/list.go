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
	seq      uint64 // arrival order within the provider; smaller waited longer
	arrived  time.Time
	started  time.Time
	deadline time.Time
	// links[byModel]: the FIFO of (model, class); links[byArrival]: the provider's arrival
	// (= deadline) order. Only queued entries are linked; a free entry's byModel.next is the
	// free list.
	links [2]link
}

type entryState uint8

const (
	free entryState = iota
	queued
	running
)

const (
	byModel   = 0
	byArrival = 1
	none      = int32(-1)
)

type link struct{ prev, next int32 }

// list is a doubly linked FIFO of entries through one kind of link.
type list struct {
	head, tail int32
	n          int
}

func newList() list { return list{head: none, tail: none} }

// push appends e at the tail of l through link kind k.
func (p *Provider) push(l *list, k int, e int32) {
	lk := &p.entries[e].links[k]
	lk.prev, lk.next = l.tail, none
	if l.tail == none {
		l.head = e
	} else {
		p.entries[l.tail].links[k].next = e
	}
	l.tail = e
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
