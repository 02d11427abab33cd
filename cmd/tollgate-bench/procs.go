package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// readyTimeout bounds how long a child may take to say where it listens.
const readyTimeout = 20 * time.Second

// proc is one child process of the benchmark: the fake backend, the bare proxy or Tollgate.
type proc struct {
	name    string
	cmd     *exec.Cmd
	addr    string // host:port it listens on
	logPath string
	exited  chan error // receives cmd.Wait's result once
}

// addrFinder recognises the line in which a child announces its address.
type addrFinder func(line string) (addr string, ok bool)

// listeningLine matches fakellm's and our own "listening on ADDR".
func listeningLine(line string) (string, bool) {
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	if !ok || addr == "" {
		return "", false
	}
	return addr, true
}

// tollgateLine matches Tollgate's JSON start-up log line {"listen":ADDR,...,"message":"tollgate is serving..."};
// it also accepts "listening on ADDR" from the profiled in-process gateway.
func tollgateLine(line string) (string, bool) {
	if addr, ok := listeningLine(line); ok {
		return addr, true
	}
	var l struct {
		Listen  string `json:"listen"`
		Message string `json:"message"`
	}
	if json.Unmarshal([]byte(line), &l) != nil || l.Listen == "" || !strings.Contains(l.Message, "serving") {
		return "", false
	}
	return l.Listen, true
}

// startProc runs path with args, sends its stdout and stderr to logDir/name.log, and returns
// once find has seen the address line. On failure the child is killed and the error names
// the log file.
func startProc(name, logDir string, find addrFinder, path string, args ...string) (*proc, error) {
	return startProcEnv(name, logDir, find, nil, path, args...)
}

// startProcEnv is startProc with env added to the child's environment.
func startProcEnv(name, logDir string, find addrFinder, env []string, path string, args ...string) (*proc, error) {
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	cmd := exec.Command(path, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		logFile.Close()
		return nil, fmt.Errorf("start %s (%s): %w", name, path, err)
	}
	pw.Close() // the child holds its own copy; our reads end when it exits
	p := &proc{name: name, cmd: cmd, logPath: logPath, exited: make(chan error, 1)}
	go func() { p.exited <- cmd.Wait() }() // exits when the child does

	found := make(chan string, 1)
	// The scanner copies every line to the log; it exits when the child closes its output.
	go func() {
		defer logFile.Close()
		defer pr.Close()
		br := bufio.NewReader(pr)
		for {
			line, err := br.ReadString('\n')
			_, _ = logFile.WriteString(line)
			if addr, ok := find(line); ok {
				found <- addr
				_, _ = io.Copy(logFile, br)
				return
			}
			if err != nil {
				return
			}
		}
	}()
	t := time.NewTimer(readyTimeout)
	defer t.Stop()
	select {
	case p.addr = <-found:
		return p, nil
	case err := <-p.exited:
		return nil, fmt.Errorf("%s exited before listening (%v); see %s", name, err, logPath)
	case <-t.C:
		_ = cmd.Process.Kill()
		<-p.exited
		return nil, fmt.Errorf("%s did not say where it listens within %s; see %s", name, readyTimeout, logPath)
	}
}

// stop asks the child to shut down (SIGTERM) and kills it if it has not exited within 10 s.
func (p *proc) stop() error { return p.stopWithin(10 * time.Second) }

// stopWithin is stop with its own time limit.
func (p *proc) stopWithin(limit time.Duration) error {
	if p == nil {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case err := <-p.exited:
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ProcessState.Sys().(syscall.WaitStatus).Signaled() {
			return nil // it did what SIGTERM asks
		}
		if err != nil {
			return fmt.Errorf("%s: %w; see %s", p.name, err, p.logPath)
		}
		return nil
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("%s did not stop within %s of SIGTERM and was killed", p.name, limit)
	}
}

// peakRSS returns the process's peak resident set size (VmHWM) in bytes.
func peakRSS(pid int) (int64, error) { return procStatusKB(pid, "VmHWM:") }

// clockTicks is USER_HZ, the unit of /proc/PID/stat CPU times; 100 on every Linux we run on.
const clockTicks = 100

// cpuTime returns the CPU time (user + system) the process has used so far.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read CPU time: %w", err)
	}
	// The command name (field 2) may hold spaces; the fields we want follow its ')'.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("read CPU time: short /proc/%d/stat", pid)
	}
	// fields[0] is field 3 (state); utime and stime are fields 14 and 15.
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("read CPU time: %w", err)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}
