package app

import (
	"os"
	"runtime/debug"
)

// The garbage collector settings the gateway runs with unless the operator sets GOGC or
// GOMEMLIMIT. The gateway's live heap is small (a few MB plus ~1 KiB per admitted request)
// while every request allocates, so at Go's default of GOGC=100 the collector runs very often
// and its pauses show in the tail: under 10× overload a 429's p99 was 6.5 ms at 100 and
// 1.9–2.9 ms at 400. The soft memory limit keeps the larger GOGC from letting the heap grow
// with load: peak RSS in the relay benchmark was 95 MB at GOGC=400 alone (docs/benchmarks.md).
// Past the limit the runtime collects more often, never more than about half the CPU.
const (
	DefaultGCPercent   = 400
	DefaultMemoryLimit = 64 << 20
)

// TuneGC applies the defaults above where the environment does not set its own. Binaries
// call it once at start; it changes process-wide settings, so the package never calls it.
func TuneGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(DefaultGCPercent)
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		debug.SetMemoryLimit(DefaultMemoryLimit)
	}
}
