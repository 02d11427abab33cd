//go:build unix && !linux

package cli

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// ensureSubreaper does nothing: only Linux has child subreapers.
func ensureSubreaper() {}

// waitExitedNoReap is not available: the caller reaps first and clears the group after.
func waitExitedNoReap(pid int) bool { return false }
