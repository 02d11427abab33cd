// Package pgtest starts a real PostgreSQL server (Debian's postgresql package) on a loopback
// port for tests, as redistest starts redis-server.
package pgtest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// binDir is where Debian installs the server's binaries.
const binDir = "/usr/lib/postgresql/15/bin"

// Start runs a fresh cluster for the test and returns its DSN; the server stops when the test
// ends. PostgreSQL refuses to run as root, so as root it runs as the "postgres" user the
// package creates. Without the binaries the test is skipped, unless CI is set: then their
// absence is a failure (.ci/run installs postgresql).
func Start(t testing.TB) string {
	t.Helper()
	initdb := filepath.Join(binDir, "initdb")
	if _, err := os.Stat(initdb); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("PostgreSQL not found (CI installs Debian's postgresql): %v", err)
		}
		t.Skip("PostgreSQL not installed (apt-get install postgresql); CI runs this test")
	}
	cred, owner := credential(t)
	root, err := os.MkdirTemp("", "pgtest")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	data, sock := filepath.Join(root, "data"), filepath.Join(root, "sock")
	for _, d := range []string{data, sock} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if owner != nil {
			if err := os.Chown(d, owner[0], owner[1]); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, cred, initdb, "-D", data, "-U", "tollgate", "--auth=trust", "-E", "UTF8", "--no-sync")
	port := freePort(t)
	cmd := exec.Command(filepath.Join(binDir, "postgres"), "-D", data, "-k", sock, "-p", strconv.Itoa(port),
		"-h", "127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start postgres: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT) // fast shutdown
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	waitReady(t, port, exited, &logs)
	return fmt.Sprintf("postgres://tollgate@127.0.0.1:%d/postgres?sslmode=disable", port)
}

// credential is who the server runs as: the caller, or "postgres" when the caller is root.
func credential(t testing.TB) (*syscall.Credential, []int) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatalf("running as root and there is no postgres user to run PostgreSQL as: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, []int{uid, gid}
}

func run(t testing.TB, cred *syscall.Credential, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", filepath.Base(name), err, out)
	}
}

func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// waitReady waits until the server accepts connections (pg_isready), or fails the test when
// it exits or takes longer than 30 s.
func waitReady(t testing.TB, port int, exited <-chan error, logs *bytes.Buffer) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		check := exec.Command(filepath.Join(binDir, "pg_isready"), "-q", "-h", "127.0.0.1", "-p", strconv.Itoa(port))
		if check.Run() == nil {
			return
		}
		select {
		case err := <-exited:
			t.Fatalf("postgres exited: %v\n%s", err, logs)
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			t.Fatalf("postgres not ready after 30s:\n%s", logs)
		}
	}
}
