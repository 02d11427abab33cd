package policy

import "time"

// An entry is one admitted request: queued, held (started by Arrive but not yet reported by
// Dispatch) or running. Entries live in Gate.entries and are linked by index, so queueing
// and dequeueing never allocate once the slab has grown to the gateway's size.
type entry struct {
	id       ID
	p, m     int32 // provider index; model index into Gate.models (not within the provider)
	class    uint8
	state    entryState
	seq      uint64 // arrival order across the gate; smaller waited longer
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
	held
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
func (g *Gate) push(l *list, k int, e int32) {
	lk := &g.entries[e].links[k]
	lk.prev, lk.next = l.tail, none
	if l.tail == none {
		l.head = e
	} else {
		g.entries[l.tail].links[k].next = e
	}
	l.tail = e
	l.n++
}

// unlink removes e, which must be in l, from l.
func (g *Gate) unlink(l *list, k int, e int32) {
	lk := &g.entries[e].links[k]
	if lk.prev == none {
		l.head = lk.next
	} else {
		g.entries[lk.prev].links[k].next = lk.next
	}
	if lk.next == none {
		l.tail = lk.prev
	} else {
		g.entries[lk.next].links[k].prev = lk.prev
	}
	lk.prev, lk.next = none, none
	l.n--
}

// alloc takes an entry from the free list, growing the slab when it is empty.
func (g *Gate) alloc() int32 {
	if g.free == none {
		g.entries = append(g.entries, entry{})
		return int32(len(g.entries) - 1)
	}
	e := g.free
	g.free = g.entries[e].links[byModel].next
	return e
}

// release returns e to the free list and forgets its id.
func (g *Gate) release(e int32) {
	delete(g.index, g.entries[e].id)
	g.entries[e] = entry{state: free, links: [2]link{{none, g.free}, {none, none}}}
	g.free = e
}
