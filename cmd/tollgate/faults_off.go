//go:build !tollgate_faults

package main

import "github.com/tollgate/tollgate/actors"

// injectFaults does nothing: only fault-tagged builds can crash their actors on purpose
// (faults_on.go).
func injectFaults(*actors.Gateway) error { return nil }
