//go:build !tollgate_faults

package actors

// newFaultPlan: production builds cannot inject faults (see faults.go).
func newFaultPlan() *faultPlan { return nil }
