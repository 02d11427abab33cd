//go:build tollgate_faults

package main

import (
	"fmt"
	"os"

	"github.com/tollgate/tollgate/cmd/internal/app"
)

// faultsEnv names the variable a fault-tagged build reads its faults from at start (the
// format of app.App.InjectFaults). Production builds have no such seam.
const faultsEnv = "TOLLGATE_FAULTS"

// injectFaults arms the faults faultsEnv lists, if any.
func injectFaults(a *app.App) error {
	v, ok := os.LookupEnv(faultsEnv)
	if !ok {
		return nil
	}
	if err := a.InjectFaults(v); err != nil {
		return fmt.Errorf("%s: %w", faultsEnv, err)
	}
	return nil
}
