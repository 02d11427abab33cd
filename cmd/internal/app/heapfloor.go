package app

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// A heap floor: the collector's goal is never below floor bytes, and above it the goal is
// GOGC's usual live × (1 + percent/100). A relay's live heap is a few megabytes plus what
// its calls in flight hold, while every call allocates: with a small live heap a plain GOGC
// collects every few megabytes of allocation (the closed-loop and admission benchmarks'
// tails), and a GOGC high enough to avoid that multiplies the heap of thousands of calls in
// flight by as much. The floor gives the first regime a large GOGC and the
// second the base one.
//
// After every collection the percent is set to what makes the next goal
// max(live × (1 + base/100), floor) (see floorPercent for its bound). The runtime has no hook
// at the end of a cycle; a finalizer on an object nothing references runs once after each
// cycle and arms the next one, on the runtime's finalizer goroutine (no goroutine of our own).

// runtimeHeapMinimum is the runtime's smallest heap goal at GOGC 100 (defaultHeapMinimum in
// runtime/mgcpacer.go). The runtime scales it with GOGC, so at a percent p no goal is below
// runtimeHeapMinimum × p/100: a percent above floor × 100 / runtimeHeapMinimum would put the
// goal above the floor (at GOGC 10,000 the first goal would be 400 MiB).
const runtimeHeapMinimum = 4 << 20

// floorPercent is the GOGC whose next heap goal is max(live × (1 + base/100), floor): at most
// the percent whose heap minimum is the floor (which is then the goal of a tiny heap) unless
// base is more.
func floorPercent(live, floor uint64, base int) int {
	bound := floor * 100 / runtimeHeapMinimum
	p := int(bound)
	if live > 0 && floor*100/live < bound+100 {
		p = int(floor*100/live) - 100
	}
	return max(base, p)
}

// heapFloor is a running floor. It runs for the life of the process.
type heapFloor struct {
	base    int
	floor   uint64
	sample  []metrics.Sample
	percent int // the percent set last; only the finalizer goroutine touches it after start
}

type gcSentinel struct{ _ [16]byte } // big enough not to share a tiny allocation block

// startHeapFloor applies the floor now (from the live heap the last collection saw) and
// after every collection from then on.
func startHeapFloor(base int, floor uint64) *heapFloor {
	h := &heapFloor{base: base, floor: floor, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}, percent: -2}
	h.adjust()
	h.arm()
	return h
}

func (h *heapFloor) arm() {
	runtime.SetFinalizer(&gcSentinel{}, func(*gcSentinel) {
		h.adjust()
		h.arm()
	})
}

func (h *heapFloor) adjust() {
	metrics.Read(h.sample)
	if p := floorPercent(h.sample[0].Value.Uint64(), h.floor, h.base); p != h.percent {
		h.percent = p
		debug.SetGCPercent(p)
	}
}
