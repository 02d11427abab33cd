package app

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// The collector settings the gateway runs with, unless the operator sets GOGC or GOMEMLIMIT
// (docs/operations.md states the rule, docs/benchmarks.md the measurements behind it):
//
//   - GOGC is DefaultGCPercent. Every call allocates while the live heap stays small, so Go's
//     default of 100 runs the collector often enough to show in the closed-loop benchmarks'
//     tails; a larger value trades memory for that, and the trade was measured in the relay,
//     admission and in-flight benchmarks alike.
//   - The soft memory limit comes only from where memory is really limited: an explicit
//     GOMEMLIMIT, or MemoryLimitRatio of the container's cgroup limit (cgroup v2 memory.max
//     or v1 memory.limit_in_bytes, read by automemlimit; AUTOMEMLIMIT=off or a ratio
//     overrides it). Without either there is none. A fixed limit below what the load needs
//     (the 64 MiB this file once set) makes the collector run without pause once thousands
//     of calls are in flight: calls slow down, more of them are in flight, and the gateway
//     falls over at a load the bare proxy carries (issue 15).
const (
	DefaultGCPercent = 400
	MemoryLimitRatio = 0.9 // of the cgroup's limit: room for what the runtime does not count
)

// GC is what TuneGC applied, for the start-up log.
type GC struct {
	Percent     int    // GOGC; negative when the collector is off (GOGC=off)
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
	return fmt.Sprintf("GOGC %d, soft memory limit %s", g.Percent, limit)
}

// TuneGC applies the settings above where the environment does not set its own. Binaries
// call it once at start; it changes process-wide settings, so the package never calls it.
func TuneGC() GC {
	g := GC{LimitFrom: "none"}
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(DefaultGCPercent)
	}
	sample := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(sample)
	g.Percent = int(int64(sample[0].Value.Uint64())) // GOGC=off reads as -1
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
