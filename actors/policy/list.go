package policy

import "time"

// An entry is one admitted request, queued or running. Entries live in queue.entries and
// are linked by index, so queueing and dequeueing never allocate once the slab has grown to
// the provider's size.
type entry struct {
	id     ID
	m      int32 // model index
	client int32 // index in queue.clients
	class  uint8
	state  entryState
	// confirmed is set on a queued entry once the dispatcher's verdict kept it (see Verdict).
	confirmed bool
	// counted says the running entry took a slot of its client's max_running (Slots).
	counted bool
	// reported is the offer that first told the dispatcher of the entry (0: none yet), and
	// mature says the dispatcher has acknowledged it (Ack): only then does it await a verdict.
	reported uint64
	mature   bool
	seq      uint64 // the order entries entered the provider
	cost     int    // estimated tokens, for the tpm buckets
	key      int32  // the key of the running call's last attempt
	bound    int32  // Arrival.Bound: 1 + the key its conversation prefers; 0 none
	// arrived orders the FIFOs: when the request first came (an older request coming back, a
	// capacity requeue or a fallback, takes its place by it), ties broken by seq.
	arrived  time.Time
	started  time.Time
	deadline time.Time
	// links[byModel]: the FIFO of (client, model, class), by arrival; links[byDeadline]: the
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

// slab holds a provider's entries: allocated by index from a free list, found by id, and
// linked into lists in arrival or deadline order.
type slab struct {
	entries []entry
	free    int32
	index   map[ID]int32
	seq     uint64
}

func newSlab(size int) slab {
	return slab{entries: make([]entry, 0, size), free: none, index: make(map[ID]int32, size)}
}

// add allocates an entry for en, numbers it in entering order and indexes it by id.
func (s *slab) add(en entry) int32 {
	var e int32
	if s.free == none {
		s.entries = append(s.entries, entry{})
		e = int32(len(s.entries) - 1)
	} else {
		e = s.free
		s.free = s.entries[e].links[byModel].next
	}
	s.seq++
	en.seq = s.seq
	s.entries[e] = en
	s.index[en.id] = e
	return e
}

// release returns e to the free list and forgets its id.
func (s *slab) release(e int32) {
	delete(s.index, s.entries[e].id)
	s.entries[e] = entry{state: free, links: [2]link{{none, s.free}, {none, none}}}
	s.free = e
}

// lookup returns the entry of id in state st; ok is false for an unknown id or one in
// another state.
func (s *slab) lookup(id ID, st entryState) (int32, bool) {
	e, ok := s.index[id]
	if !ok || s.entries[e].state != st {
		return none, false
	}
	return e, true
}

// before reports whether entry a comes before entry b in lists of kind k: by arrival for a
// FIFO, by deadline for the deadline order; ties by the order they entered.
func (s *slab) before(k int, a, b int32) bool {
	ea, eb := &s.entries[a], &s.entries[b]
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
func (s *slab) insert(l *list, k int, e int32) {
	after := l.tail
	for after != none && s.before(k, e, after) {
		after = s.entries[after].links[k].prev
	}
	lk := &s.entries[e].links[k]
	lk.prev = after
	if after == none {
		lk.next = l.head
		l.head = e
	} else {
		lk.next = s.entries[after].links[k].next
		s.entries[after].links[k].next = e
	}
	if lk.next == none {
		l.tail = e
	} else {
		s.entries[lk.next].links[k].prev = e
	}
	l.n++
}

// unlink removes e, which must be in l, from l.
func (s *slab) unlink(l *list, k int, e int32) {
	lk := &s.entries[e].links[k]
	if lk.prev == none {
		l.head = lk.next
	} else {
		s.entries[lk.prev].links[k].next = lk.next
	}
	if lk.next == none {
		l.tail = lk.prev
	} else {
		s.entries[lk.next].links[k].prev = lk.prev
	}
	lk.prev, lk.next = none, none
	l.n--
}

// runningEntry returns the entry of running request id, or nil.
func (s *slab) runningEntry(id ID) *entry {
	if e, ok := s.lookup(id, running); ok {
		return &s.entries[e]
	}
	return nil
}

// forgetKeys forgets the key of every running entry on a model of pool pl, whose keys
// were replaced.
func (s *slab) forgetKeys(poolOf []int, pl int) {
	for e := range s.entries {
		en := &s.entries[e]
		if en.state == running && int(en.m) < len(poolOf) && poolOf[en.m] == pl {
			en.key = -1
		}
	}
}
