package app

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"sync"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// The collector settings the gateway runs with, unless the operator sets GOGC or GOMEMLIMIT
// (docs/operations.md states the rule, docs/benchmarks.md the measurements behind it):
//
//   - GOGC is DefaultGCPercent above a heap floor of DefaultHeapFloor (heapfloor.go): while
//     the live heap is small, as it is when few calls are in flight, the collector waits
//     until the heap reaches the floor; once thousands of calls are in flight it runs at
//     Go's usual pace, so the heap stays about twice what they hold. A fixed GOGC of 400
//     won the closed-loop benchmarks and held five times the live heap of every call in
//     flight. An operator's GOGC is taken as it is, without a floor.
//   - The soft memory limit comes only from where memory is really limited: an explicit
//     GOMEMLIMIT, or MemoryLimitRatio of the container's cgroup limit (cgroup v2 memory.max
//     or v1 memory.limit_in_bytes, read by automemlimit; AUTOMEMLIMIT=off or a ratio
//     overrides it). Without either there is none. A fixed limit below what the load needs
//     makes the collector run without pause once thousands of calls are in flight: calls
//     slow down, more of them are in flight, and the gateway falls over at a load the bare
//     proxy carries (docs/benchmarks.md). The limit takes precedence over the floor.
//   - Memory a burst leaves behind goes back to the operating system once the gateway has
//     been quiet for ReleaseInterval (release.go), instead of when the runtime's forced
//     collection and scavenger get to it minutes later. It runs with the floor: an operator's
//     GOGC is taken as it is, without either.
const (
	DefaultGCPercent = 100
	DefaultHeapFloor = 64 << 20
	MemoryLimitRatio = 0.9 // of the cgroup's limit: room for what the runtime does not count
)

// GC is what TuneGC applied, for the start-up log.
type GC struct {
	Percent     int    // GOGC (above the floor); negative when the collector is off (GOGC=off)
	HeapFloor   uint64 // bytes; 0 when there is none (the operator set GOGC)
	Release     bool   // whether the idle release runs (it runs with the floor)
	MemoryLimit int64  // bytes; math.MaxInt64 when there is none
	LimitFrom   string // "GOMEMLIMIT", "cgroup" or "none"
	Err         error  // why the cgroup's limit could not be read; the gateway runs without one
}

// String is the start-up log's account of the settings.
func (g GC) String() string {
	limit := "none"
	if g.MemoryLimit != math.MaxInt64 {
		limit = fmt.Sprintf("%d MiB (from %s)", g.MemoryLimit>>20, g.LimitFrom)
	}
	floor := ""
	if g.HeapFloor > 0 {
		floor = fmt.Sprintf(" above a %d MiB heap floor", g.HeapFloor>>20)
	}
	release := ""
	if g.Release {
		release = fmt.Sprintf(", idle memory returned after %s quiet", ReleaseInterval)
	}
	return fmt.Sprintf("GOGC %d%s, soft memory limit %s%s", g.Percent, floor, limit, release)
}

// tuned makes TuneGC start one heap floor and one idle release however often it is called.
var tuned sync.Once

// TuneGC applies the settings above where the environment does not set its own. Binaries
// call it once at start; it changes process-wide settings, so the package never calls it.
func TuneGC() GC {
	g := GC{LimitFrom: "none"}
	if _, set := os.LookupEnv("GOGC"); set {
		sample := []metrics.Sample{{Name: "/gc/gogc:percent"}}
		metrics.Read(sample)
		g.Percent = int(int64(sample[0].Value.Uint64())) // GOGC=off reads as -1
	} else {
		tuned.Do(func() {
			startHeapFloor(DefaultGCPercent, DefaultHeapFloor)
			startIdleRelease(DefaultHeapFloor)
		})
		g.Percent, g.HeapFloor, g.Release = DefaultGCPercent, DefaultHeapFloor, true
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); set {
		g.LimitFrom = "GOMEMLIMIT"
		g.MemoryLimit = debug.SetMemoryLimit(-1)
		return g
	}
	// Set leaves the limit unchanged when it cannot read the cgroup; with no limit there it
	// sets none (math.MaxInt64).
	g.MemoryLimit, g.Err = memlimit.Set(memlimit.WithRatio(MemoryLimitRatio), memlimit.WithProvider(memlimit.FromCgroup))
	if g.Err == nil && g.MemoryLimit != math.MaxInt64 {
		g.LimitFrom = "cgroup"
	}
	return g
}
