// Package affinity is session affinity (SPEC §19) as pure code: which provider key, and
// which model, served a conversation last, so that its next turn goes there again and the
// backend's prompt cache hits.
//
// A binding is made or refreshed when a call of the conversation succeeds (Bind) and is kept
// for TTL after that; a binding is only ever a preference, which the caller gives up when
// its key cannot take the call now (the next success moves it). The table is a bounded LRU:
// beyond Max bindings, the one used longest ago goes.
//
// A Table has no goroutines, timers or clock: every method that depends on time takes now.
// It is not safe for concurrent use; its owner guards it. With several replicas, a table is
// one replica's cache of the bindings they share: a binding another replica made is
// adopted (Adopt) with the time it was made.
package affinity

import (
	"container/list"
	"time"
)

// Defaults, used for a zero Config field.
const (
	DefaultTTL = time.Hour // affinity_ttl
	DefaultMax = 100_000   // affinity_max
)

// Config is a table's rule. A zero field takes its default.
type Config struct {
	TTL time.Duration // how long a binding is kept after its last success
	Max int           // bindings kept at most
}

// Binding is where a conversation was last served.
type Binding struct {
	Provider string
	Key      int    // the key's index in the pool of Model's provider
	Model    string // the served model's id, "provider/model"
}

// Outcome is what a success did to its conversation's binding, as the log line says it.
type Outcome uint8

const (
	None  Outcome = iota // the call named no conversation
	Made                 // it had no live binding: one is made ("new")
	Hit                  // it was served where it was bound
	Moved                // it was served elsewhere: the binding moves there
)

func (o Outcome) String() string {
	switch o {
	case Made:
		return "new"
	case Hit:
		return "hit"
	case Moved:
		return "moved"
	}
	return ""
}

// entry is one binding in the LRU list, most recently used first.
type entry struct {
	name    string
	b       Binding
	used    time.Time // the last success
	checked time.Time // when it was last known to be as new as the replicas' (LookupDue)
}

// Table is the bindings by conversation name.
type Table struct {
	ttl    time.Duration
	max    int
	lru    *list.List // of *entry, most recently used at the front
	byName map[string]*list.Element
}

// WithDefaults is cfg with each zero (or negative) field replaced by its default.
func (cfg Config) WithDefaults() Config {
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.Max <= 0 {
		cfg.Max = DefaultMax
	}
	return cfg
}

// New returns an empty table.
func New(cfg Config) *Table {
	cfg = cfg.WithDefaults()
	return &Table{ttl: cfg.TTL, max: cfg.Max, lru: list.New(), byName: map[string]*list.Element{}}
}

// Lookup is conversation name's binding at now; ok is false when it has none, or its
// binding expired (which Lookup then forgets). It does not count as a use.
func (t *Table) Lookup(name string, now time.Time) (b Binding, ok bool) {
	el := t.live(name, now)
	if el == nil {
		return Binding{}, false
	}
	return el.Value.(*entry).b, true
}

// live is name's element if its binding is live at now; an expired one is removed.
func (t *Table) live(name string, now time.Time) *list.Element {
	el, ok := t.byName[name]
	if !ok {
		return nil
	}
	if !now.Before(el.Value.(*entry).used.Add(t.ttl)) {
		t.remove(el)
		return nil
	}
	return el
}

// Bind records that a call of conversation name succeeded at now, served as b, and says
// what that did: Made, Hit or Moved. An empty name binds nothing (None). The binding becomes
// the most recently used; beyond Max, the least recently used one is forgotten.
func (t *Table) Bind(name string, b Binding, now time.Time) Outcome {
	if name == "" {
		return None
	}
	if el := t.live(name, now); el != nil {
		e := el.Value.(*entry)
		out := Hit
		if e.b != b {
			out = Moved
		}
		e.b, e.used, e.checked = b, now, now
		t.lru.MoveToFront(el)
		return out
	}
	t.push(name, b, now, now)
	return Made
}

// push adds name's binding, used at used and checked at checked, as the most recently used;
// beyond Max, the least recently used one is forgotten.
func (t *Table) push(name string, b Binding, used, checked time.Time) {
	t.byName[name] = t.lru.PushFront(&entry{name: name, b: b, used: used, checked: checked})
	for t.lru.Len() > t.max {
		t.remove(t.lru.Back())
	}
}

// Adopt records the binding name has at the replicas, b, last used at used (another
// replica's success, or this one's written through), as read at now: it replaces the
// table's own when that is older (another replica moved the conversation since), and is
// taken when the table has none; a binding expired at now is not taken. Either way the
// table's binding of name counts as checked at now (LookupDue). It reports whether b was
// taken; it becomes the most recently used, as a lookup that found it is followed by the
// call it orders.
func (t *Table) Adopt(name string, b Binding, used, now time.Time) bool {
	if name == "" {
		return false
	}
	el := t.live(name, now)
	if el != nil {
		e := el.Value.(*entry)
		e.checked = now
		if !e.used.Before(used) {
			return false
		}
		e.b, e.used = b, used
		t.lru.MoveToFront(el)
		return true
	}
	if !now.Before(used.Add(t.ttl)) {
		return false
	}
	t.push(name, b, used, now)
	return true
}

// LookupDue is Lookup that also reports whether the binding found was last checked
// against the replicas' (made here, or read from them: Adopt, Checked) every or longer ago:
// another replica may have moved the conversation since.
func (t *Table) LookupDue(name string, now time.Time, every time.Duration) (b Binding, ok, due bool) {
	el := t.live(name, now)
	if el == nil {
		return Binding{}, false, false
	}
	e := el.Value.(*entry)
	return e.b, true, !now.Before(e.checked.Add(every))
}

// Checked records that name's live binding, if it has one, was checked at now: the
// replicas had none newer, or could not be asked (LookupDue does not call it due again
// before its interval).
func (t *Table) Checked(name string, now time.Time) {
	if el := t.live(name, now); el != nil {
		el.Value.(*entry).checked = now
	}
}

func (t *Table) remove(el *list.Element) {
	delete(t.byName, el.Value.(*entry).name)
	t.lru.Remove(el)
}

// Len is the number of bindings held, expired ones not yet forgotten included.
func (t *Table) Len() int { return t.lru.Len() }

// Counts is the live bindings at now per provider; expired ones are forgotten.
func (t *Table) Counts(now time.Time) map[string]int {
	out := map[string]int{}
	for el := t.lru.Back(); el != nil; {
		prev := el.Prev()
		if e := el.Value.(*entry); now.Before(e.used.Add(t.ttl)) {
			out[e.b.Provider]++
		} else {
			t.remove(el)
		}
		el = prev
	}
	return out
}
