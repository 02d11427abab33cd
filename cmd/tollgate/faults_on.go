//go:build tollgate_faults

package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/tollgate/tollgate/actors"
)

// faultsEnv names the variable a fault-tagged build reads its faults from at start: a JSON
// array of actors.Fault, e.g. [{"Actor":"supervisor","Times":-1}]. It lets a test or a chaos
// drill crash the actors of a real process; production builds have no such seam.
const faultsEnv = "TOLLGATE_FAULTS"

// injectFaults arms the faults faultsEnv lists, if any.
func injectFaults(g *actors.Gateway) error {
	v, ok := os.LookupEnv(faultsEnv)
	if !ok {
		return nil
	}
	var faults []actors.Fault
	if err := json.Unmarshal([]byte(v), &faults); err != nil {
		return fmt.Errorf("%s: want a JSON array of faults: %w", faultsEnv, err)
	}
	for _, f := range faults {
		if err := g.InjectFault(f); err != nil {
			return fmt.Errorf("%s: %w", faultsEnv, err)
		}
	}
	return nil
}
