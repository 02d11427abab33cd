package app

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// An idle release: memory a burst leaves behind goes back to the operating system once the
// gateway is quiet. After a burst of large requests the heap goal is twice what the burst
// held; a quiet gateway allocates too little to reach it, so no collection runs until the
// runtime's forced one two minutes later, and the scavenger returns the pages only after
// that. Meanwhile the process keeps its peak resident set.
//
// The release checks the process every ReleaseInterval. When the gateway was quiet over the
// interval (it allocated less than releaseIdle) and holds more than a heap floor, it
// collects twice (sync.Pool keeps what the first collection leaves in its victim cache, and
// encoding/json pools its buffers there) and returns the free pages (debug.FreeOSMemory).
// Quiet is not idle: the calls of a burst may be waiting for their backends, holding what
// they hold, and a gateway may hold thousands of queued calls. So a release that freed less
// than a floor doubles the wait before the next one, up to maxReleaseWait; one that freed
// more, or an interval in which the gateway allocated, makes the next check eligible again.
// A busy gateway is never stopped for it, and a quiet one holding memory in use pays one
// collection a minute at most.

// ReleaseInterval is how often the idle release looks at the process.
const ReleaseInterval = 5 * time.Second

// releaseIdle is the most a gateway may allocate in ReleaseInterval and count as quiet: probes,
// metric scrapes and a few small calls, not a burst that is still being answered.
const releaseIdle = 4 << 20

// memSample is what the release decides from: bytes allocated since the start, and bytes
// the process holds from the operating system (mapped, less what the runtime released).
type memSample struct {
	allocs, held uint64
}

// maxReleaseWait is the most checks a release waits after one that freed little.
const maxReleaseWait = 12

// releaseState is the release's memory between checks.
type releaseState struct {
	last memSample
	wait int // checks to let pass before the next release
	step int // the wait after a release that frees little, doubled each time (0: 1)
}

// next decides, from the sample now, whether to release, and returns the state to keep.
func (s releaseState) next(now memSample, floor uint64) (releaseState, bool) {
	quiet := now.allocs-s.last.allocs < releaseIdle
	s.last = now
	switch {
	case !quiet:
		s.wait, s.step = 0, 0 // what it allocates may be garbage by the next check
		return s, false
	case s.wait > 0:
		s.wait--
		return s, false
	}
	return s, now.held > floor
}

// released is the state after a release that took the process from before to after.
func (s releaseState) released(before, after memSample, floor uint64) releaseState {
	s.last = after
	if before.held >= after.held+floor {
		s.wait, s.step = 0, 0 // more may follow as the calls of a burst end
		return s
	}
	s.step = min(max(2*s.step, 1), maxReleaseWait)
	s.wait = s.step
	return s
}

// idleRelease is a running release. It runs for the life of the process.
type idleRelease struct {
	floor   uint64
	state   releaseState
	sample  []metrics.Sample
	release func()
}

// startIdleRelease checks the process every ReleaseInterval from now on, on a timer's
// goroutine (none of its own between checks).
func startIdleRelease(floor uint64) *idleRelease {
	r := &idleRelease{floor: floor, release: releaseMemory, sample: releaseSamples()}
	r.state.last = r.read()
	time.AfterFunc(ReleaseInterval, r.tick)
	return r
}

// releaseSamples are the runtime metrics read reads, in its order.
func releaseSamples() []metrics.Sample {
	return []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"}}
}

// tick is one check; it arms the next.
func (r *idleRelease) tick() {
	r.check()
	time.AfterFunc(ReleaseInterval, r.tick)
}

// check releases when the state says so.
func (r *idleRelease) check() {
	st, release := r.state.next(r.read(), r.floor)
	r.state = st
	if release {
		r.release()
		r.state = st.released(st.last, r.read(), r.floor)
	}
}

// read samples the runtime's counters.
func (r *idleRelease) read() memSample {
	metrics.Read(r.sample)
	return memSample{allocs: r.sample[0].Value.Uint64(), held: r.sample[1].Value.Uint64() - r.sample[2].Value.Uint64()}
}

// releaseMemory collects twice, so that pooled buffers are freed too, and returns the free
// pages to the operating system.
func releaseMemory() {
	runtime.GC()
	debug.FreeOSMemory()
}
