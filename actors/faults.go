package actors

import (
	"fmt"
	"strings"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
)

// faultPlan is the seam through which tests make actors panic, to prove supervision. Only
// builds with the tollgate_faults tag have one (faults_inject.go); in every other build
// newFaultPlan returns nil and hit costs a nil check.
type faultPlan struct {
	mu    sync.Mutex
	rules []*faultRule
	fired int
}

type faultKind uint8

const (
	faultSupervisor faultKind = iota
	faultProvider
	faultLane
	faultRequest
	// faultOutOfService is a provider actor out of service: a "provider" fault never fires
	// there (a fault that repeats took it out of service), this one fires only there.
	faultOutOfService
	// faultRebuilding is a provider actor rebuilding after a crash, beside faultProvider,
	// which fires there too.
	faultRebuilding
)

var faultKindNames = [...]string{"supervisor", "provider", "lane", "request", "provider_out_of_service", "provider_rebuilding"}

type faultRule struct {
	kind            faultKind
	provider, model string
	on              string // message type name; "" matches any
	left            int    // panics left; < 0: every time
	hold            <-chan struct{}
	holding         chan<- struct{}
}

// hit panics if a rule matches the actor and the message it is about to handle (or, for a
// rule that holds, waits until its hold is closed). Lifecycle
// messages never match: a panic there would stop protoactor's own bookkeeping, which no
// fault of ours can.
func (f *faultPlan) hit(kind faultKind, provider, model string, msg any) {
	if f == nil {
		return
	}
	switch msg.(type) {
	case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting, *actor.Terminated:
		return
	}
	name := strings.TrimPrefix(fmt.Sprintf("%T", msg), "*actors.")
	f.mu.Lock()
	var hit *faultRule
	for _, r := range f.rules {
		if r.kind == kind && r.left != 0 && (r.provider == "" || r.provider == provider) &&
			(r.model == "" || r.model == model) && (r.on == "" || r.on == name) {
			hit = r
			break
		}
	}
	if hit != nil {
		if hit.left > 0 {
			hit.left--
		}
		if hit.hold == nil {
			f.fired++
		}
	}
	f.mu.Unlock()
	if hit != nil && hit.hold != nil {
		select {
		case hit.holding <- struct{}{}:
		default: // nil, or nobody has room for it
		}
		<-hit.hold
		return
	}
	if hit != nil {
		panic(fmt.Sprintf("injected fault in the %s actor (%s %s) handling %s", faultKindNames[kind], provider, model, name))
	}
}
