package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// DefaultKillGrace is how long a CLI gets between SIGTERM and SIGKILL when Config.KillGrace is zero.
const DefaultKillGrace = 3 * time.Second

// stragglerWait bounds how long cleanup waits for the rest of a child's process group to be
// reaped after the child itself is gone.
const stragglerWait = 2 * time.Second

// spec is everything needed to start one child.
type spec struct {
	path  string
	args  []string
	env   []string
	dir   string
	stdin *os.File // read end the child gets as fd 0; the caller closes it after start
	grace time.Duration
	// stderrMax bounds how much of the child's stderr is kept (the tail).
	stderrMax int
}

// process is one running CLI child, the leader of its own process group.
//
// Its lifecycle: start launches it and two goroutines. The reaper waits for the child to exit,
// SIGKILLs whatever is left of its group while the child is still an unreaped zombie (so the
// group id cannot have been reused), reaps it and closes exited; it ends then. The watcher
// waits for the request context or for release and ends the child on cancellation; it ends
// when either fires. release makes sure both have ended.
type process struct {
	cmd    *exec.Cmd
	pgid   int
	grace  time.Duration
	stdout *os.File // our read end of the child's stdout
	stderr *tailBuffer

	exited  chan struct{} // closed once the child is reaped; waitErr is set before
	waitErr error

	released    chan struct{} // closed by release: the stream is done with the child
	releaseOnce sync.Once
	watcherDone chan struct{}

	termOnce     sync.Once
	stdoutClosed sync.Once
}

// start launches the child in its own process group with stdout on a pipe we read and stderr
// captured into a bounded tail buffer. ctx cancellation terminates the group.
func start(ctx context.Context, s spec) (*process, error) {
	ensureSubreaper()
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	p := &process{
		grace:       s.grace,
		stdout:      outR,
		stderr:      newTailBuffer(s.stderrMax),
		exited:      make(chan struct{}),
		released:    make(chan struct{}),
		watcherDone: make(chan struct{}),
	}
	if p.grace <= 0 {
		p.grace = DefaultKillGrace
	}
	cmd := exec.Command(s.path, s.args...)
	cmd.Env = s.env
	cmd.Dir = s.dir
	cmd.Stdin = s.stdin
	cmd.Stdout = outW
	cmd.Stderr = p.stderr
	// If stderr is held open by something that escaped the group, stop waiting for it soon
	// after the child is gone rather than hang Wait.
	cmd.WaitDelay = time.Second
	cmd.SysProcAttr = sysProcAttr()
	p.cmd = cmd

	err = cmd.Start()
	outW.Close() // the child has its copy; ours would keep the pipe from ever reaching EOF
	if err != nil {
		outR.Close()
		return nil, fmt.Errorf("start %s: %w", s.path, err)
	}
	p.pgid = cmd.Process.Pid // Setpgid with Pgid 0: the child leads a group named after itself

	go p.reap()     // exits once the child is reaped
	go p.watch(ctx) // exits on ctx.Done or release
	return p, nil
}

// reap waits for the child, clears out its process group and closes exited.
func (p *process) reap() {
	zombie := waitExitedNoReap(p.cmd.Process.Pid)
	if zombie {
		// The child is a zombie now and still holds the group id: anything left in its group
		// is an orphan we own. Kill it before the id can be reused.
		p.signalGroup(syscall.SIGKILL)
	}
	p.waitErr = p.cmd.Wait()
	if !zombie {
		p.signalGroup(syscall.SIGKILL) // best effort where we cannot wait without reaping
	}
	reapGroup(p.pgid, stragglerWait)
	close(p.exited)
}

// watch terminates the child when ctx ends before the stream is released.
func (p *process) watch(ctx context.Context) {
	defer close(p.watcherDone)
	select {
	case <-ctx.Done():
		p.terminate()
		// The child is gone; if something outside its group still holds stdout, a blocked
		// reader would never see EOF. Nobody needs the rest of a cancelled answer.
		p.closeStdout()
	case <-p.released:
	}
}

// terminate sends SIGTERM to the group, SIGKILL after the grace period if the child is still
// there, and returns once the child is reaped. Safe to call concurrently and repeatedly.
func (p *process) terminate() {
	p.termOnce.Do(func() {
		select {
		case <-p.exited:
			return // reaped already; its group id may belong to someone else by now
		default:
		}
		p.signalGroup(syscall.SIGTERM)
		t := time.NewTimer(p.grace)
		defer t.Stop()
		select {
		case <-p.exited:
		case <-t.C:
			p.signalGroup(syscall.SIGKILL)
		}
	})
	<-p.exited
}

// release ends the child (giving it up to the grace period to exit on its own when
// graceful is set, as after a complete answer), waits until it and the watcher are gone and
// closes stdout. Safe to call more than once.
func (p *process) release(graceful bool) {
	if graceful {
		t := time.NewTimer(p.grace)
		select {
		case <-p.exited:
		case <-t.C:
		}
		t.Stop()
	}
	p.releaseOnce.Do(func() { close(p.released) })
	p.terminate()
	<-p.watcherDone
	p.closeStdout()
}

func (p *process) closeStdout() { p.stdoutClosed.Do(func() { p.stdout.Close() }) }

// signalGroup signals every process in the child's group; a group that is already gone is fine.
// Errors are ignored: ESRCH means nothing is left, and there is nothing to do about EPERM.
func (p *process) signalGroup(sig syscall.Signal) {
	_ = syscall.Kill(-p.pgid, sig)
}

// exitCode returns the child's exit status after exited is closed: -1 when a signal ended it.
func (p *process) exitCode() int {
	if p.cmd.ProcessState == nil {
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

// exitDescription says how the child ended, for error messages.
func (p *process) exitDescription() string {
	st := p.cmd.ProcessState
	if st == nil {
		if p.waitErr != nil {
			return p.waitErr.Error()
		}
		return "unknown exit"
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf("killed by signal %d", int(ws.Signal()))
	}
	return fmt.Sprintf("exit status %d", st.ExitCode())
}

// groupAlive reports whether any process of the group still exists (zombies included).
func groupAlive(pgid int) bool {
	err := syscall.Kill(-pgid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// reapGroup reaps members of group pgid that were re-parented to us (we are a child
// subreaper on Linux) until the group is gone or the wait has taken too long. Members that
// went to another reaper are only waited for.
func reapGroup(pgid int, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for groupAlive(pgid) && time.Now().Before(deadline) {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-pgid, &ws, syscall.WNOHANG, nil)
		if err == nil && pid > 0 {
			continue // reaped one; look for more at once
		}
		// Nothing to reap yet (still dying, or not ours): poll. The deadline bounds it.
		time.Sleep(10 * time.Millisecond)
	}
}
