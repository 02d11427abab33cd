package cli

import (
	"sync"
	"syscall"
	"unsafe"
)

func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Setpgid: true,
		// If the gateway dies without cleaning up, the CLI dies with it instead of running on.
		// Linux ties this to the thread that forked; Go only retires threads locked by a
		// goroutine that exited, and Start never runs on such a thread.
		Pdeathsig: syscall.SIGKILL,
	}
}

var subreaperOnce sync.Once

// ensureSubreaper makes this process a child subreaper (PR_SET_CHILD_SUBREAPER), once.
//
// Why: a CLI is often a wrapper (node launching a native binary) and its tools spawn more.
// When the leader dies first, the rest are re-parented. If they went to an init that does
// not reap (common in containers and micro-VMs), their zombies would keep the process group
// alive forever and we could not tell "gone" from "still running". As a subreaper we inherit
// them and reapGroup reaps exactly the members of the groups we started.
//
// Side effect, process-wide: orphans of other children of this process come to us too; only
// those in our CLI groups are reaped. The gateway starts no other long-lived children.
func ensureSubreaper() {
	subreaperOnce.Do(func() {
		const prSetChildSubreaper = 36
		_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	})
}

// waitExitedNoReap blocks until process pid has exited, leaving it unreaped (waitid with
// WNOWAIT), and reports whether that worked.
func waitExitedNoReap(pid int) bool {
	const (
		pPID    = 1
		wNowait = 0x1000000
	)
	var info [128]byte // siginfo_t; contents unused
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|wNowait, 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		return errno == 0
	}
}
