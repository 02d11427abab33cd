package app

import (
	"runtime"
	"testing"
)

func TestReleaseDecision(t *testing.T) {
	const mib = 1 << 20
	floor := uint64(64 * mib)
	at := func(allocs, held uint64, wait, step int) releaseState {
		return releaseState{memSample{allocs, held}, wait, step}
	}
	tests := []struct {
		name       string
		state      releaseState
		now        memSample
		release    bool
		wait, step int // the state kept
	}{
		{"a burst has just ended", at(1000*mib, 1500*mib, 0, 0), memSample{1000*mib + 100, 1500 * mib}, true, 0, 0},
		{"still answering the burst", at(1000*mib, 1500*mib, 0, 0), memSample{1100 * mib, 1500 * mib}, false, 0, 0},
		{"allocating ends a wait", at(1000*mib, 100*mib, 5, 8), memSample{1100 * mib, 300 * mib}, false, 0, 0},
		{"quiet, waiting", at(1000*mib, 900*mib, 2, 4), memSample{1000 * mib, 900 * mib}, false, 1, 4},
		{"quiet, the wait is over", at(1000*mib, 900*mib, 0, 4), memSample{1000 * mib, 900 * mib}, true, 0, 4},
		{"quiet and small", at(1000*mib, 60*mib, 0, 0), memSample{1000 * mib, 64 * mib}, false, 0, 0},
		{"just above the floor", at(0, 0, 0, 0), memSample{releaseIdle - 1, 64*mib + 1}, true, 0, 0},
		{"an allocation of releaseIdle is not quiet", at(0, 0, 0, 0), memSample{releaseIdle, 900 * mib}, false, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, release := tt.state.next(tt.now, floor)
			if release != tt.release || st.wait != tt.wait || st.step != tt.step || st.last != tt.now {
				t.Errorf("next = %+v, %v; want wait %d, step %d, release %v", st, release, tt.wait, tt.step, tt.release)
			}
		})
	}
	for _, tt := range []struct {
		name          string
		step          int
		before, after uint64
		wait          int
	}{
		{"freed a floor: look again at once", 4, 1500 * mib, 800 * mib, 0},
		{"freed exactly a floor", 0, 164 * mib, 100 * mib, 0},
		{"freed less, the first time", 0, 900 * mib, 850 * mib, 1},
		{"freed less again", 1, 900 * mib, 850 * mib, 2},
		{"and again", 8, 900 * mib, 850 * mib, maxReleaseWait},
		{"at the most", maxReleaseWait, 900 * mib, 850 * mib, maxReleaseWait},
	} {
		st := at(0, 0, 0, tt.step).released(memSample{1, tt.before}, memSample{2, tt.after}, floor)
		if st.wait != tt.wait || (tt.wait > 0 && st.step != tt.wait) || st.last != (memSample{2, tt.after}) {
			t.Errorf("%s: released = %+v, want wait %d", tt.name, st, tt.wait)
		}
	}
}

// TestIdleReleaseChecks drives the release's check with the runtime's real counters: a check
// while the heap grows does not release, the quiet check after it does, and the next, with
// the heap below the floor, does not.
func TestIdleReleaseChecks(t *testing.T) {
	released := 0
	r := &idleRelease{floor: 32 << 20, release: func() { released++; releaseMemory() }, sample: releaseSamples()}
	r.state.last = r.read()
	garbage := make([][]byte, 64)
	for i := range garbage {
		garbage[i] = make([]byte, 1<<20)
	}
	r.check() // 64 MiB allocated since the last sample: busy
	if released != 0 {
		t.Fatalf("released while allocating")
	}
	// Live until here, or the collector may take the first slices while the later ones are
	// made (it does without -race), and the heap would never hold the 64 MiB.
	runtime.KeepAlive(garbage)
	garbage = nil
	r.check() // quiet now, and holding the 64 MiB
	if released != 1 || r.state.wait != 0 {
		t.Fatalf("released %d times, want 1, and no wait after freeing 64 MiB: state %+v", released, r.state)
	}
	r.check()
	if released != 1 {
		t.Fatalf("released again below the floor: state %+v", r.state)
	}
	_ = garbage
}
