//go:build tollgate_faults

package app

import (
	"encoding/json"
	"fmt"

	"github.com/tollgate/tollgate/actors"
)

// InjectFaults arms the faults spec lists, a JSON array of actors.Fault such as
// [{"Actor":"supervisor","Times":-1}], so that a test or a chaos drill can crash the actors
// of a running process. Only builds with the tollgate_faults tag have it.
func (a *App) InjectFaults(spec string) error {
	var faults []actors.Fault
	if err := json.Unmarshal([]byte(spec), &faults); err != nil {
		return fmt.Errorf("faults: want a JSON array of faults: %w", err)
	}
	for _, f := range faults {
		if err := a.Gateway.InjectFault(f); err != nil {
			return fmt.Errorf("faults: %w", err)
		}
	}
	return nil
}
