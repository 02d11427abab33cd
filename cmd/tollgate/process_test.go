package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// Tests that run the built tollgate binary as a separate process: its command line, and
// what it does on signals.

// Version and commit the test build embeds, as `make build` does with -ldflags.
const (
	testVersion = "v9.8.7-test"
	testCommit  = "0123456789abcdef0123456789abcdef01234567"
)

var builds sync.Map // ldflags and tags → *built

type built struct {
	once sync.Once
	path string
	err  error
}

// tollgateBinary builds ./ (with ldflags, when given) once per test run and returns its path.
func tollgateBinary(t *testing.T, ldflags string) string {
	t.Helper()
	return buildTollgate(t, ldflags, "")
}

// buildTollgate builds ./ with ldflags and build tags (each "" for none) once per test run
// and returns its path.
func buildTollgate(t *testing.T, ldflags, tags string) string {
	t.Helper()
	v, _ := builds.LoadOrStore(ldflags+"\x00"+tags, &built{})
	b := v.(*built)
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "tollgate-bin-*")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, "tollgate")
		args := append([]string{"build"}, raceFlag...)
		if ldflags != "" {
			args = append(args, "-ldflags", ldflags)
		}
		if tags != "" {
			args = append(args, "-tags", tags)
		}
		out, err := exec.Command("go", append(args, "-o", b.path, ".")...).CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	builds.Range(func(_, v any) bool {
		if b := v.(*built); b.path != "" {
			os.RemoveAll(filepath.Dir(b.path))
		}
		return true
	})
	os.Exit(code)
}

// runTollgate runs the binary to completion with a deadline and returns its exit code and output.
func runTollgate(t *testing.T, bin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }() // exits with the process
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("tollgate %v did not exit within 20s (it serves instead?)\nstderr: %s", args, errOut.String())
	}
	return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
}

func TestCommandLine(t *testing.T) {
	bin := tollgateBinary(t, "-X main.buildVersion="+testVersion+" -X main.buildCommit="+testCommit)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("providers:\n  - name: demo\n    kind: fake\n    lanes: 0\n    models: [{id: echo}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join("..", "..", "testdata", "config", "minimal.yaml")
	clustered := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(clustered, []byte("providers: [{name: demo, kind: fake, models: [{id: echo}]}]\ncluster: {redis: {addr: \"127.0.0.1:6379\", password: pw-never-shown}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name            string
		args            []string
		code            int
		stdout, stderr  []string // fragments that must appear
		emptyOut, quiet bool     // nothing on stdout; nothing on stderr
	}{
		{name: "version", args: []string{"--version"}, stdout: []string{"tollgate " + testVersion + " (commit " + testCommit + ", go1.", "linux/"}, quiet: true},
		{name: "version single dash", args: []string{"-version"}, stdout: []string{testVersion}, quiet: true},
		{name: "help", args: []string{"--help"}, stdout: []string{"Usage:", "--check-config file", "--config file", "--listen address", "--version"}, quiet: true},
		{name: "h", args: []string{"-h"}, stdout: []string{"Usage:"}, quiet: true},
		{name: "unknown flag", args: []string{"--verbose"}, code: 1, stderr: []string{"tollgate: flag provided but not defined: -verbose (tollgate --help lists the flags)"}, emptyOut: true},
		{name: "stray argument", args: []string{"version"}, code: 1, stderr: []string{`tollgate: unexpected argument "version": tollgate takes flags only`}, emptyOut: true},
		{name: "argument after flags", args: []string{"--config", good, "serve"}, code: 1, stderr: []string{`unexpected argument "serve"`}, emptyOut: true},
		{name: "flag without value", args: []string{"--config"}, code: 1, stderr: []string{"flag needs an argument: -config"}, emptyOut: true},
		{name: "check good config", args: []string{"--check-config", good}, stdout: []string{"config: " + good, "provider demo (kind fake", "drain: drain_delay 5s, drain_grace 30s", good + ": ok"}, quiet: true},
		{name: "check bad config", args: []string{"--check-config", bad}, code: 1, stderr: []string{"bad.yaml:4: providers[0].lanes: must be at least 1"}, emptyOut: true},
		{name: "check cluster config", args: []string{"--check-config", clustered}, stdout: []string{"cluster: redis 127.0.0.1:6379, password set, lease_ttl 10s", "cluster.yaml: ok"}},
		{name: "check missing file", args: []string{"--check-config", filepath.Join(dir, "nope.yaml")}, code: 1, stderr: []string{"read config:", "nope.yaml: no such file"}, emptyOut: true},
		{name: "check with another flag", args: []string{"--check-config", good, "--listen", "127.0.0.1:0"}, code: 1, stderr: []string{"--check-config takes the file to check and no other flag"}, emptyOut: true},
		{name: "bad config does not start", args: []string{"--config", bad}, code: 1, stderr: []string{"providers[0].lanes: must be at least 1"}, emptyOut: true},
		{name: "bad listen does not start", args: []string{"--config", good, "--listen", "nowhere"}, code: 1, stderr: []string{`tollgate: --listen: ../../testdata/config/minimal.yaml: listen: must be host:port, e.g. 127.0.0.1:8080, got "nowhere"`}, emptyOut: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runTollgate(t, bin, tc.args...)
			if code != tc.code {
				t.Errorf("exit code %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, stdout, stderr)
			}
			for _, w := range tc.stdout {
				if !strings.Contains(stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout)
				}
			}
			for _, w := range tc.stderr {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if tc.emptyOut && stdout != "" {
				t.Errorf("stdout not empty: %s", stdout)
			}
			if tc.quiet && stderr != "" {
				t.Errorf("stderr not empty: %s", stderr)
			}
		})
	}
}

// TestVersionWithoutLdflags: a plain `go build` still says what it is, from the build info.
// The go command stamps a pseudo-version (v0.0.0-<time>-<commit>) when it builds a clean
// checkout and "(devel)" when the tree has changes, so both are what it is.
func TestVersionWithoutLdflags(t *testing.T) {
	code, stdout, _ := runTollgate(t, tollgateBinary(t, ""), "--version")
	line := regexp.MustCompile(`^tollgate (\(devel\)|v\d+\.\d+\.\d+\S*) \(commit (\S+), go1\.\d+\S*, \w+/\w+\)\n$`)
	if code != 0 || !line.MatchString(stdout) {
		t.Errorf("exit %d, %q", code, stdout)
	}
}
