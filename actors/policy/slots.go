package policy

import "sync"

// Slots is each client's calls running gateway-wide, shared by every Provider of a gateway
// (ProviderSpec.Clients), by which a client's max_running (llm.Client.MaxRunning) holds
// across providers (SPEC §18): a provider's simulation skips a client with no room, so its
// calls wait in their queues, keeping their places, while other clients' start; a start
// takes a slot atomically, so providers running concurrently never let a client past its
// cap. Only clients with a cap are counted. It is safe for concurrent use.
//
// Freed is told the name of a client that was at its cap when one of its calls stopped: the
// providers holding its calls must offer again, since what they could start has changed
// without anything happening to them.
//
// With several replicas a client's cap holds cluster-wide too: a client the replicas run at
// its cap is held (Hold), and has no room here until Unhold, whatever it runs here.
type Slots struct {
	mu      sync.Mutex
	running map[string]int
	held    map[string]bool
	freed   func(name string)
}

// NewSlots returns empty slots that tell freed (nil: nobody) of a capped client's stop.
func NewSlots(freed func(name string)) *Slots {
	return &Slots{running: map[string]int{}, freed: freed}
}

// Room is how many more calls client name may start under its cap max (> 0).
func (s *Slots) Room(name string, max int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[name] {
		return 0
	}
	return max - s.running[name]
}

// Take counts a start of client name if it runs fewer than max, and reports whether it did;
// with force it counts the start whatever the cap (a batch member, which the batch rule
// admits as a whole).
func (s *Slots) Take(name string, max int, force bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !force && (s.running[name] >= max || s.held[name]) {
		return false
	}
	s.running[name]++
	return true
}

// Put counts one of client name's counted calls as stopped; max is its cap: a client that
// had exactly max running has room again, and Freed is told.
func (s *Slots) Put(name string, max int) {
	s.mu.Lock()
	n := s.running[name]
	if n <= 1 {
		delete(s.running, name)
	} else {
		s.running[name] = n - 1
	}
	s.mu.Unlock()
	if n == max && s.freed != nil {
		s.freed(name)
	}
}

// Running is client name's counted calls running now.
func (s *Slots) Running(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running[name]
}

// Hold gives client name no room until Unhold: the replicas run it at its cap.
func (s *Slots) Hold(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held == nil {
		s.held = map[string]bool{}
	}
	s.held[name] = true
}

// Unhold ends the hold of every held client that freed reports (nil: every one) and
// reports whether it ended one; the caller has the providers offer again.
func (s *Slots) Unhold(freed func(name string) bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.held)
	for name := range s.held {
		if freed == nil || freed(name) {
			delete(s.held, name)
		}
	}
	return len(s.held) < n
}

// Held reports whether client name is held (Hold).
func (s *Slots) Held(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held[name]
}
