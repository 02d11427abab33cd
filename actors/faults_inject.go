//go:build tollgate_faults

package actors

import "fmt"

// Fault makes an actor panic when it handles a message, to prove supervision in tests and
// chaos drills. It exists only in builds with the tollgate_faults tag: a production binary
// has no way to inject one.
type Fault struct {
	Actor    string // "supervisor", "provider", "lane", "request", "provider_out_of_service" or "provider_rebuilding"
	Provider string // the provider's name; "" any (not used for the supervisor)
	Model    string // the backend model name, for "lane" and "request"; "" any
	On       string // the message type to panic on ("arrive", "grants", "startCall", ...); "" any
	Times    int    // how many times to panic: 0 once, < 0 every time
	// Hold, when set, makes the actor wait until it is closed instead of panicking (it
	// keeps another actor in a mode while a test sends it messages); a hold is not counted
	// by FaultsFired.
	Hold <-chan struct{}
	// Holding, when set with Hold, is sent to as the hold begins (without blocking: give it
	// room), so that a test knows the actor is waiting.
	Holding chan<- struct{}
}

func newFaultPlan() *faultPlan { return &faultPlan{} }

// InjectFault adds a fault; they are tried in the order they were added.
func (g *Gateway) InjectFault(f Fault) error {
	kind := -1
	for i, n := range faultKindNames {
		if n == f.Actor {
			kind = i
		}
	}
	if kind < 0 {
		return fmt.Errorf("inject: actor %q: want supervisor, provider, lane, request, provider_out_of_service or provider_rebuilding", f.Actor)
	}
	if f.Provider != "" && g.table.Load().providerIndex(f.Provider) < 0 {
		return fmt.Errorf("inject: no provider %q", f.Provider)
	}
	left := f.Times
	if left == 0 {
		left = 1
	}
	g.faults.mu.Lock()
	defer g.faults.mu.Unlock()
	g.faults.rules = append(g.faults.rules, &faultRule{kind: faultKind(kind), provider: f.Provider, model: f.Model, on: f.On, left: left, hold: f.Hold, holding: f.Holding})
	return nil
}

// ClearFaults removes every fault not yet spent.
func (g *Gateway) ClearFaults() {
	g.faults.mu.Lock()
	defer g.faults.mu.Unlock()
	g.faults.rules = nil
}

// FaultsFired counts the panics injected so far.
func (g *Gateway) FaultsFired() int {
	g.faults.mu.Lock()
	defer g.faults.mu.Unlock()
	return g.faults.fired
}
