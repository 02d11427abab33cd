package policy

import "sync"

// Slots is each client's calls running gateway-wide, shared by every Provider of a gateway
// (ProviderSpec.Clients), by which a client's max_running (llm.Client.MaxRunning) holds
// across providers (SPEC §18): a provider's simulation skips a client with no room, so its
// calls wait in their queues, keeping their places, while other clients' start; a start
// takes a slot atomically, so providers running concurrently never let a client past its
// cap. Only clients with a cap are counted. It is safe for concurrent use.
//
// Changed is told the name of a client whose room under its cap came or went: one of its
// calls stopped while it was at its cap, or a start took its last slot. The providers
// holding its calls must offer again, since what they could start has changed without
// anything happening to them; and the dispatcher, which knows whom each offered start
// serves (Offer.Heads), grants nothing past a start for a client with no room until they
// have.
type Slots struct {
	mu      sync.Mutex
	running map[string]int
	changed func(name string)
}

// NewSlots returns empty slots that tell changed (nil: nobody) of a capped client's room
// coming or going.
func NewSlots(changed func(name string)) *Slots {
	return &Slots{running: map[string]int{}, changed: changed}
}

// Room is how many more calls client name may start under its cap max (> 0).
func (s *Slots) Room(name string, max int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return max - s.running[name]
}

// Take counts a start of client name if it runs fewer than max, and reports whether it did;
// with force it counts the start whatever the cap (a batch member, which the batch rule
// admits as a whole).
func (s *Slots) Take(name string, max int, force bool) bool {
	s.mu.Lock()
	n := s.running[name]
	if !force && n >= max {
		s.mu.Unlock()
		return false
	}
	s.running[name] = n + 1
	s.mu.Unlock()
	if n+1 == max && s.changed != nil {
		s.changed(name)
	}
	return true
}

// Put counts one of client name's counted calls as stopped; max is its cap: a client that
// had exactly max running has room again, and Changed is told.
func (s *Slots) Put(name string, max int) {
	s.mu.Lock()
	n := s.running[name]
	if n <= 1 {
		delete(s.running, name)
	} else {
		s.running[name] = n - 1
	}
	s.mu.Unlock()
	if n == max && s.changed != nil {
		s.changed(name)
	}
}

// Running is client name's counted calls running now.
func (s *Slots) Running(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running[name]
}
