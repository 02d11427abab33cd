// Package redistest starts a real redis-server for a test or the load harness: loopback
// only, a free port, its own directory, no persistence (a restart comes back empty, as a
// Redis without persistence does). Tests of the lease engine and of replicas sharing it,
// and the load harness's cluster scenario, use it.
package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a redis-server started for a test (Start) or for the load harness (Launch).
type Server struct {
	t    testing.TB // nil: Launch's, whose failures are errors
	bin  string
	dir  string
	port int
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has been reaped
}

// Start starts a server, stopped when the test ends. Without redis-server the test is
// skipped, unless CI is set: then its absence is a failure (.ci/run installs it).
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-server not found (CI installs Debian's redis-server): %v", err)
		}
		t.Skip("redis-server not installed (apt-get install redis-server); CI runs this test")
	}
	s, err := launch(bin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s.t = t
	t.Cleanup(s.Stop)
	return s
}

// Launch starts a server keeping its files in dir, outside of a test; the caller stops
// it. exec.ErrNotFound (wrapped) means redis-server is not installed.
func Launch(dir string) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redistest: %w", err)
	}
	return launch(bin, dir)
}

func launch(bin, dir string) (*Server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("redistest: a free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	s := &Server{bin: bin, dir: dir, port: port}
	return s, s.Restart()
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Start runs the server again after Stop (empty), failing the test if it does not answer.
func (s *Server) Start() {
	if err := s.Restart(); err != nil {
		s.t.Helper()
		s.t.Fatal(err)
	}
}

// Restart runs redis-server (again, after Stop: empty) and waits until it answers PING.
func (s *Server) Restart() error {
	s.cmd = exec.Command(s.bin, "--bind", "127.0.0.1", "--port", strconv.Itoa(s.port),
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--daemonize", "no",
		"--logfile", filepath.Join(s.dir, "redis.log"))
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("redistest: start redis-server: %w", err)
	}
	s.done = make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(s.done) }() // exits when the server does
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			s.Stop()
			return fmt.Errorf("redistest: redis-server does not answer PING after 10s: %w", err)
		}
		<-tick.C
	}
}

// Stop ends the server (SIGTERM, then SIGKILL after 5 s) and waits for it.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT) // a paused server cannot handle SIGTERM
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	s.cmd = nil
}

// Pause freezes the server (SIGSTOP): connections stay open and nothing answers, as a
// Redis too slow to be of use; Resume lets it go on with its data.
func (s *Server) Pause()  { _ = s.cmd.Process.Signal(syscall.SIGSTOP) }
func (s *Server) Resume() { _ = s.cmd.Process.Signal(syscall.SIGCONT) }

// Client is a plain client for a test's own checks, closed when the test ends.
func (s *Server) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, Protocol: 2})
	if s.t != nil {
		s.t.Cleanup(func() { _ = c.Close() })
	}
	return c
}
