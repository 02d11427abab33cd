package app

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"
)

// tuneGCChild makes the test binary run TuneGC and print what it applied: the settings are
// process-wide, so each case runs in a process of its own.
const tuneGCChild = "TOLLGATE_TUNEGC_CHILD"

func TestTuneGC(t *testing.T) {
	// With neither variable, the limit comes from the cgroup when it has one (CI may run in a
	// limited container), and otherwise there is none: never a fixed one.
	noLimit := fmt.Sprintf("%d %d none <nil>", DefaultGCPercent, int64(math.MaxInt64))
	tests := []struct {
		name string
		env  []string
		want func(got string) bool
	}{
		{"defaults", nil, func(got string) bool {
			return got == noLimit || (strings.HasPrefix(got, fmt.Sprint(DefaultGCPercent)+" ") && strings.HasSuffix(got, " cgroup <nil>"))
		}},
		{"GOGC", []string{"GOGC=150"}, func(got string) bool { return strings.HasPrefix(got, "150 ") }},
		{"GOGC off", []string{"GOGC=off"}, func(got string) bool { return strings.HasPrefix(got, "-1 ") }},
		{"GOMEMLIMIT", []string{"GOMEMLIMIT=300MiB"}, func(got string) bool {
			return got == fmt.Sprintf("%d %d GOMEMLIMIT <nil>", DefaultGCPercent, 300<<20)
		}},
		{"AUTOMEMLIMIT off", []string{"AUTOMEMLIMIT=off"}, func(got string) bool { return got == noLimit }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(withoutGCVars(os.Environ()), append(tt.env, tuneGCChild+"=1")...)
			out, err := cmd.Output()
			got := strings.TrimSpace(string(out))
			if err != nil || !tt.want(got) {
				t.Fatalf("TuneGC with %v applied %q (%v)", tt.env, got, err)
			}
		})
	}
}

// withoutGCVars drops the collector's variables the test run itself may have been given.
func withoutGCVars(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "GOGC=") && !strings.HasPrefix(kv, "GOMEMLIMIT=") && !strings.HasPrefix(kv, "AUTOMEMLIMIT=") {
			out = append(out, kv)
		}
	}
	return out
}

func TestFloorPercent(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		live, floor uint64
		base, want  int
	}{
		{8 * mib, 64 * mib, 100, 700},     // goal 8 × 8 = 64 MiB
		{32 * mib, 64 * mib, 100, 100},    // 32 × 2 is the floor already
		{300 * mib, 64 * mib, 100, 100},   // far above it: GOGC as set
		{1, 64 * mib, 100, 1600},          // a tiny heap: the runtime's minimum, 4 MiB × 16, is the floor
		{0, 64 * mib, 100, 1600},          // nothing live yet
		{2 * mib, 64 * mib, 100, 1600},    // 3,100 % would make the minimum 124 MiB
		{mib, 16 * mib, 100, 400},         // a smaller floor, a smaller bound
		{16 * mib, 64 * mib, 400, 400},    // a base above what the floor needs
		{1 * mib, 64 * mib, 20000, 20000}, // a base above the bound wins
		{63 * mib, 64 * mib, 100, 100},    // 1 % over would be below the base
		{10 * mib, 0, 100, 100},           // no floor
		{64*mib + 1, 64 * mib, 50, 50},    // just above the floor
		{1 << 40, 64 * mib, 100, 100},     // a huge heap
		{6 * mib, 64 * mib, 100, 966},     // rounds down
		{mib / 2, 64 * mib, 100, 1600},    // 12,700 % would be needed
	}
	for _, tt := range tests {
		if got := floorPercent(tt.live, tt.floor, tt.base); got != tt.want {
			t.Errorf("floorPercent(live %d, floor %d, base %d) = %d, want %d", tt.live, tt.floor, tt.base, got, tt.want)
		}
	}
}

// TestHeapFloor: in a process of its own, the floor raises GOGC while the live heap is small
// and brings it back to the base once the heap holds more than the floor.
func TestHeapFloor(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(withoutGCVars(os.Environ()), tuneGCChild+"=floor")
	out, err := cmd.CombinedOutput()
	var small, big int
	var goal uint64
	if _, serr := fmt.Sscanf(string(out), "small %d goal %d big %d", &small, &goal, &big); err != nil || serr != nil {
		t.Fatalf("child: %v %v: %s", err, serr, out)
	}
	if small <= 100 || big != 100 {
		t.Fatalf("GOGC %d with a small live heap (want above 100), %d with one past the floor (want 100)", small, big)
	}
	// The goal is the floor, not what the runtime's heap minimum scaled by a large GOGC makes
	// of it (a 400 MiB first collection at GOGC 10,000).
	if goal < 15<<20 || goal > 18<<20 {
		t.Fatalf("heap goal %d MiB with a small live heap, want the 16 MiB floor", goal>>20)
	}
}

// heapFloorChild is TestHeapFloor's child: a 16 MiB floor, a heap of a few MiB, then one of
// 48 MiB, reading the percent the floor set after each (it is set after a collection, on
// the finalizer goroutine: polled with a deadline).
func heapFloorChild() {
	startHeapFloor(100, 16<<20)
	settle := func(want func(int) bool) int {
		deadline := time.Now().Add(10 * time.Second)
		for {
			runtime.GC()
			sample := []metrics.Sample{{Name: "/gc/gogc:percent"}}
			metrics.Read(sample)
			p := int(sample[0].Value.Uint64())
			if want(p) || time.Now().After(deadline) {
				return p
			}
			time.Sleep(10 * time.Millisecond) // the finalizer runs after the collection
		}
	}
	small := settle(func(p int) bool { return p > 100 })
	goal := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
	metrics.Read(goal)
	ballast := make([]byte, 48<<20)
	big := settle(func(p int) bool { return p == 100 })
	runtime.KeepAlive(ballast)
	fmt.Printf("small %d goal %d big %d\n", small, goal[0].Value.Uint64(), big)
}
