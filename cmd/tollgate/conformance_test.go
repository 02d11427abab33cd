package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/cmd/internal/app"
	"github.com/tollgate/tollgate/cmd/internal/fakellm"
	"github.com/tollgate/tollgate/cmd/internal/statuswriter"
)

// The client conformance suite: real, pinned Node clients (testdata/conformance/package.json,
// installed into .tools/ by .ci/install-clients) run against the gateway with fakellm behind
// it. Each client's script (testdata/conformance/*.mjs) makes its calls and prints one JSON
// line per check: what its user sees. The test asserts on those lines, and on what a tap in
// front of the gateway saw of each check's requests: how many attempts the client made, what
// each was answered and how long the client waited before each retry. The checks are in
// conformance_checks_test.go. They skip when node or a package is absent, unless CI is set.

// conformanceKey is the gateway's client key; "wrong-key" is what the 401 checks send.
const conformanceKey = "conformance-key"

// conformanceReply is fakellm's answer to every plain call.
const conformanceReply = "Hello from the backend, through the toll gate."

// conformanceConfig serves fakellm at url as: "oai" (kind openai: Chat and Responses relayed),
// "ant" (kind anthropic: Messages relayed), "chat" (kind ollama: every ingress translated to
// Chat Completions), and "busy", whose one lane a held call takes so every other call is the
// gateway's own 429. fakellm answers model "broken" with a 500 and "quirk-*" models with the
// quirk they name. Nothing is retried, rested or learned by the gateway, so a client's
// attempts are the backend's; busy answers advise a 1 s wait.
func conformanceConfig(url string) string {
	return fmt.Sprintf(`
limits: {retry_after: 1s}
auth: {api_keys: [%[2]s]}
providers:
  - name: oai
    kind: openai
    base_url: %[1]s/v1
    keys: [test-key]
    models: [{id: fake-model}, {id: broken}, {id: quirk-error-midstream}, {id: quirk-drop}]
%[3]s  - name: ant
    kind: anthropic
    base_url: %[1]s
    keys: [test-key]
    models: [{id: fake-model}, {id: broken}, {id: parallel-chat}, {id: parallel-responses}]
%[3]s  - name: chat
    kind: ollama
    base_url: %[1]s/v1
    models: [{id: fake-model}, {id: quirk-error-midstream}]
%[3]s  - name: busy
    kind: ollama
    base_url: %[1]s/v1
    lanes: 1
    queue_length: 0
    models: [{id: quirk-hang}, {id: fake-model}]
%[3]s`, url, conformanceKey, noResilience)
}

// conformanceEnv is the gateway under test, its tap and the backend behind it.
type conformanceEnv struct {
	vars    []string // more of the scripts' environment, NAME=value
	gw      *gateway
	tap     *checkTap
	backend *bodyTap
}

// startConformance serves fakellm, the gateway in front of it with its tap, and takes the
// one lane of "busy" with a call fakellm holds until the test ends.
func startConformance(t *testing.T) *conformanceEnv {
	t.Helper()
	fake := fakellm.New(fakellm.Options{Reply: conformanceReply, Chunks: 5, Modes: fakellm.ModeToolCall,
		Script: fakellm.Script{Models: map[string]fakellm.ModelScript{"broken": {Mode: "error"}}}})
	backend := &bodyTap{next: fake}
	srv := httptest.NewServer(backend)
	t.Cleanup(srv.Close)
	tap := &checkTap{byCheck: map[string][]*tapRecord{}}
	gw := serveWrapped(t, conformanceConfig(srv.URL), app.Options{Logger: zerolog.Nop()}, tap.wrap)
	holdLane(t, gw)
	return &conformanceEnv{gw: gw, tap: tap, backend: backend}
}

// holdLane takes busy's one lane with a call that lasts until the test's cleanup cancels it.
func holdLane(t *testing.T, gw *gateway) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() { // ends when the cleanup cancels the call
		defer close(done)
		req, _ := http.NewRequestWithContext(ctx, "POST", gw.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"busy/quirk-hang","stream":true,"messages":[{"role":"user","content":"hold"}]}`))
		req.Header.Set("Authorization", "Bearer "+conformanceKey)
		if res, err := http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for gw.Gateway.State().Running != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the call holding busy's lane never started: %+v", gw.Gateway.State())
		}
		time.Sleep(time.Millisecond) // polling with a deadline
	}
}

// tapRecord is one request the gateway served for a check.
type tapRecord struct {
	at         time.Time
	method     string
	path       string
	retryCount string // the client's x-stainless-retry-count, when it sends one
	status     int    // 0 while the gateway is still answering
	header     http.Header
}

// checkTap wraps the gateway's handler and records every request that names its check in
// the x-conformance-check header.
type checkTap struct {
	mu      sync.Mutex
	byCheck map[string][]*tapRecord
}

func (c *checkTap) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.Header.Get("X-Conformance-Check")
		if name == "" {
			next.ServeHTTP(w, r)
			return
		}
		rec := &tapRecord{at: time.Now(), method: r.Method, path: r.URL.Path, retryCount: r.Header.Get("X-Stainless-Retry-Count")}
		c.mu.Lock()
		c.byCheck[name] = append(c.byCheck[name], rec)
		c.mu.Unlock()
		sw := statuswriter.New(w)
		next.ServeHTTP(sw, r)
		c.mu.Lock()
		rec.status, rec.header = sw.Status(), w.Header().Clone()
		c.mu.Unlock()
	})
}

// records returns a copy of a check's records, in arrival order.
func (c *checkTap) records(name string) []tapRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]tapRecord, 0, len(c.byCheck[name]))
	for _, r := range c.byCheck[name] {
		out = append(out, *r)
	}
	return out
}

// bodyTap keeps the body of every request the backend gets, by the model it names, so a
// check can see what the gateway sent on (a translation's fields).
type bodyTap struct {
	next   http.Handler
	mu     sync.Mutex
	bodies map[string][]map[string]any
}

func (b *bodyTap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	var m map[string]any
	if json.Unmarshal(body, &m) == nil {
		if model, _ := m["model"].(string); model != "" {
			b.mu.Lock()
			if b.bodies == nil {
				b.bodies = map[string][]map[string]any{}
			}
			b.bodies[model] = append(b.bodies[model], m)
			b.mu.Unlock()
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	b.next.ServeHTTP(w, r)
}

// sent returns the bodies the backend got for model.
func (b *bodyTap) sent(model string) []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]map[string]any(nil), b.bodies[model]...)
}

// nodeClients finds node and the pinned client packages in .tools/node_modules: it returns
// node's path and node_modules', skipping (failing when CI is set) when any is missing or
// not at its pinned version.
func nodeClients(t *testing.T) (node, modules string) {
	t.Helper()
	absent := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		absent("node not found on PATH: the client conformance suite needs it")
	}
	modules, _ = filepath.Abs(filepath.Join("..", "..", ".tools", "node_modules"))
	pins, err := os.ReadFile(filepath.Join("..", "..", "testdata", "conformance", "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want struct{ Dependencies map[string]string }
	if err := json.Unmarshal(pins, &want); err != nil {
		t.Fatalf("testdata/conformance/package.json: %v", err)
	}
	for name, version := range want.Dependencies {
		b, err := os.ReadFile(filepath.Join(modules, name, "package.json"))
		var have struct{ Version string }
		if err == nil {
			err = json.Unmarshal(b, &have)
		}
		if err != nil || have.Version != version {
			absent("%s@%s not installed in %s (have %q): run .ci/install-clients", name, version, modules, have.Version)
		}
	}
	return node, modules
}

// clientLine is one line a script prints: the check's name and what it observed.
type clientLine struct {
	name string
	obs  map[string]any
}

// runScript runs one client script with node against the gateway and returns its lines by
// check. The scripts are copied beside a node_modules link to .tools, where Node's module
// resolution finds the packages. The process is killed, with its group, after a minute.
func runScript(t *testing.T, node, modules, script string, env *conformanceEnv) map[string]clientLine {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join("..", "..", "testdata", "conformance")
	for _, f := range []string{"lib.mjs", script} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(modules, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = dir
	// A clean environment: nothing of the caller's (API keys, base URLs, proxies, tracing)
	// reaches the clients, and nothing they do leaves loopback.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "NODE_OPTIONS=", "TOLLGATE_URL=" + env.gw.URL,
		"TOLLGATE_KEY=" + conformanceKey, "OPENAI_AGENTS_DISABLE_TRACING=1", "LANGCHAIN_TRACING_V2=false"}
	cmd.Env = append(cmd.Env, env.vars...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if stderr.Len() > 0 {
		t.Logf("%s stderr:\n%s", script, stderr.String())
	}
	if err != nil {
		t.Errorf("node %s: %v (the checks it printed are still asserted)", script, err)
	}
	return parseLines(t, script, stdout.Bytes())
}

// parseLines reads a script's JSON lines; a line that is not one is a failure.
func parseLines(t *testing.T, script string, out []byte) map[string]clientLine {
	t.Helper()
	lines := map[string]clientLine{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var obs map[string]any
		if err := json.Unmarshal(sc.Bytes(), &obs); err != nil {
			t.Errorf("%s printed a line that is not a check's JSON: %q", script, sc.Text())
			continue
		}
		name, _ := obs["check"].(string)
		if _, dup := lines[name]; dup || name == "" {
			t.Errorf("%s printed check %q twice or without a name: %s", script, name, sc.Text())
		}
		lines[name] = clientLine{name: name, obs: obs}
	}
	return lines
}

// TestClientConformance runs every client's script against one gateway, in parallel, and
// asserts each check: every check the table names must be printed, and every printed check
// must be in the table.
func TestClientConformance(t *testing.T) {
	node, modules := nodeClients(t)
	env := startConformance(t)
	for _, c := range conformanceClients {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			lines := runScript(t, node, modules, c.script, env)
			for _, chk := range c.checks {
				t.Run(strings.TrimPrefix(chk.name, c.name+"/"), func(t *testing.T) {
					line, ok := lines[chk.name]
					if !ok {
						t.Fatalf("%s: the script printed no result", chk.name)
					}
					chk.assert(t, line.obs, env)
				})
				delete(lines, chk.name)
			}
			unasserted := make([]string, 0, len(lines))
			for name := range lines {
				unasserted = append(unasserted, name)
			}
			sort.Strings(unasserted)
			if len(unasserted) > 0 {
				t.Errorf("%s printed checks the test does not assert: %v", c.script, unasserted)
			}
		})
	}
}
