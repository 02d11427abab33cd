package app

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"
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
