package policy

import (
	"sync"

	"github.com/tollgate/tollgate/providers/llm"
)

// Shares is each client's service at the gateway's max_running, per class: by it the
// dispatcher shares the global cap between clients by weighted fair queuing (SPEC §18), as
// each provider's queue shares its lanes (queue). It belongs to the gateway, not to the
// dispatcher, so it outlives a rebuilt dispatcher or provider; it is safe for concurrent use.
//
// A start of class c for a client of weight w costs fairScale/w. The dispatcher charges the
// starts it grants, in the order it grants them, to the client each provider's offer names
// for them (Offer.Heads); a provider charges the starts it makes on standing credit, which
// the dispatcher never sees. When several providers could start class c and max_running
// lets fewer start than they could, the dispatcher grants the provider whose next start
// serves the client with the least service (tie: the providers' round-robin). Two clients
// waiting at different providers for the cap therefore share it by weight, within a start.
//
// Being idle earns no credit for later: a client's call that enters a provider's queue
// where the client had nothing of its class waiting takes up the class's virtual time (the
// highest service a start was charged at) if the client's own service is lower, as a
// provider's queue does with its own service (so a provider rebuilt from its facts, which
// enters its waiting calls afresh, may cost their clients a lead, never give them one).
// Charging a start is order-free (a sum per
// client and a maximum), so grants handled in any order across providers leave the same
// shares; only an entry into a queue reads the virtual time.
type Shares struct {
	mu    sync.Mutex
	tags  map[string]*serviceTags
	anon  *serviceTags // tags[""]: the anonymous client's, every call's without client keys
	vtime serviceTags
}

// serviceTags is one client's service per class, or a class's virtual time.
type serviceTags [llm.NumPriorities]int64

// NewShares returns shares in which no client has had any service.
func NewShares() *Shares {
	anon := new(serviceTags)
	return &Shares{tags: map[string]*serviceTags{"": anon}, anon: anon}
}

// of returns client name's service, made on first use. The pointer stays valid: a queue
// keeps it for its client's later entries and starts.
func (s *Shares) of(name string) *serviceTags {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tagsOf(name)
}

// tagsOf is of with s.mu held.
func (s *Shares) tagsOf(name string) *serviceTags {
	if name == "" {
		return s.anon
	}
	t := s.tags[name]
	if t == nil {
		t = new(serviceTags)
		s.tags[name] = t
	}
	return t
}

// floor raises service t (from of) in class c to the class's virtual time, for a client
// whose call enters a queue where it had nothing of class c waiting.
func (s *Shares) floor(t *serviceTags, c int) {
	s.mu.Lock()
	t[c] = max(t[c], s.vtime[c])
	s.mu.Unlock()
}

// charge counts one start of class c on service t (from of) for a client of the given
// share (its weight).
func (s *Shares) charge(t *serviceTags, c int, share int) {
	s.mu.Lock()
	s.vtime[c] = max(s.vtime[c], t[c])
	t[c] += startCost(share)
	s.mu.Unlock()
}

// chargeName is charge for client name, found or made as of does.
func (s *Shares) chargeName(name string, c int, share int) {
	s.mu.Lock()
	t := s.tagsOf(name)
	s.vtime[c] = max(s.vtime[c], t[c])
	t[c] += startCost(share)
	s.mu.Unlock()
}

// tag is client name's service in class c; a client never seen is at the virtual time.
func (s *Shares) tag(name string, c int) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if name == "" {
		return s.anon[c]
	}
	if t := s.tags[name]; t != nil {
		return t[c]
	}
	return s.vtime[c]
}
