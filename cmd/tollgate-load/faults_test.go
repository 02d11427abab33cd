//go:build tollgate_faults

package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestActorFaults runs the actor-faults scenario (make test runs the fault-tagged tests):
// panics in each actor kind under load, once and repeatedly, must keep every invariant.
func TestActorFaults(t *testing.T) {
	ss, err := choose("actor-faults", false)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, r := range ss[0].run(ctx, runOpts{seed: 1}) {
		if len(r.Breaches) > 0 {
			t.Errorf("%s [%s]: %s", r.Scenario, r.Setup, strings.Join(r.Breaches, "\n"))
		}
	}
}
