//go:build !tollgate_faults

package main

import "github.com/tollgate/tollgate/cmd/internal/app"

// injectFaults does nothing: only fault-tagged builds can crash their actors on purpose
// (faults_on.go).
func injectFaults(*app.App) error { return nil }
