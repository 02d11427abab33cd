package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// process is a tollgate binary serving a config, with its log collected.
type process struct {
	cmd    *exec.Cmd
	path   string // its config file
	url    string
	log    *syncBuffer
	exited chan struct{} // closed once the process has been reaped
}

var listenLine = regexp.MustCompile(`"listen":"(127\.0\.0\.1:\d+)"[^\n]*"message":"tollgate is serving`)

// startProcess runs tollgate with yaml as its config and waits until it serves. The process
// is killed at the end of the test if it is still running.
func startProcess(t *testing.T, yaml string) *process {
	t.Helper()
	return startBinary(t, tollgateBinary(t, ""), yaml)
}

// startBinary is startProcess with the binary bin and the variables env added to the
// test's environment.
func startBinary(t *testing.T, bin, yaml string, env ...string) *process {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tollgate.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: exec.Command(bin, "--config", path), path: path, log: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd.Stderr = p.log
	p.cmd.Env = append(append(os.Environ(), "GORACE=halt_on_error=1"), env...)
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }() // exits with the process
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
	deadline := time.Now().Add(20 * time.Second)
	for p.url == "" {
		if m := listenLine.FindStringSubmatch(p.log.String()); m != nil {
			p.url = "http://" + m[1]
			break
		}
		select {
		case <-p.exited:
			t.Fatalf("tollgate exited before serving: %s", p.log.String())
		case <-time.After(10 * time.Millisecond): // polling its log with a deadline
		}
		if time.Now().After(deadline) {
			t.Fatalf("tollgate not serving after 20s: %s", p.log.String())
		}
	}
	return p
}

func (p *process) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// waitLog polls the process's log until it contains s.
func (p *process) waitLog(t *testing.T, s string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(p.log.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("log lacks %q after %s:\n%s", s, within, p.log.String())
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
}

func readyz(url string) (int, string) {
	res, err := rawClient.Get(url + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, strings.TrimSpace(string(b))
}

// openStream starts a streaming call and returns once its first event arrived; the rest of
// the stream, read to its end, comes on the channel.
func openStream(t *testing.T, url, model string) <-chan []string {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, model)
	res, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("stream answered %d: %s", res.StatusCode, b)
	}
	rd := bufio.NewReader(res.Body)
	first, err := rd.ReadString('\n')
	if err != nil || !strings.HasPrefix(first, "data: ") {
		t.Fatalf("first line %q, %v", first, err)
	}
	events := make(chan []string, 1)
	go func() { // exits when the gateway ends the stream (or the test's process is killed)
		defer res.Body.Close()
		lines := []string{strings.TrimSpace(first)}
		for {
			l, err := rd.ReadString('\n')
			if l = strings.TrimSpace(l); l != "" {
				lines = append(lines, l)
			}
			if err != nil {
				if err != io.EOF {
					lines = append(lines, "read error: "+err.Error())
				}
				events <- lines
				return
			}
		}
	}()
	return events
}

const drainConfig = `
listen: 127.0.0.1:0
drain_delay: 2s
drain_grace: 1s
providers:
  - name: demo
    kind: fake
    lanes: 8
    model_lanes: 8
    models:
      - id: echo
      - id: long            # far longer than the test: only the drain ends it
        reply: "%s"
        tokens_per_second: 20
`

// TestDrainOnSIGTERM drives a real process through SIGHUP and then SIGTERM: SIGHUP reloads
// the unchanged file, which changes nothing; on SIGTERM /readyz turns 503 at once while new requests are still served for
// drain_delay, then the listener closes, and at the end of drain_grace every open stream ends
// with the SPEC §4 gateway_draining event and an answer not yet started gets a 503, before
// the process exits 0.
func TestDrainOnSIGTERM(t *testing.T) {
	p := startProcess(t, fmt.Sprintf(drainConfig, strings.Repeat("word ", 2000)))

	p.signal(t, syscall.SIGHUP)
	p.waitLog(t, `"changes":["nothing changed"]`, 5*time.Second)
	if code, body := readyz(p.url); code != http.StatusOK {
		t.Fatalf("after SIGHUP /readyz %d %s", code, body)
	}

	const streams = 6
	var open []<-chan []string
	for range streams {
		open = append(open, openStream(t, p.url, "demo/long"))
	}
	whole := postAsync(context.Background(), p.url, "demo/long", "", false)
	waitRunning(t, p.url, streams+1)

	p.signal(t, syscall.SIGTERM)
	sent := time.Now()
	deadline := sent.Add(2 * time.Second)
	for {
		code, body := readyz(p.url)
		if code == http.StatusServiceUnavailable && strings.Contains(body, `"draining"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d %s 2s after SIGTERM", code, body)
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
	if a := post(context.Background(), p.url, "demo/echo", "", false); a.err != nil || a.status != http.StatusOK {
		t.Errorf("a request during drain_delay (%s after SIGTERM): %d %v %s", time.Since(sent), a.status, a.err, a.body)
	}

	// After drain_delay the listener closes: new connections are refused.
	addr := strings.TrimPrefix(p.url, "http://")
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			break
		}
		c.Close()
		if time.Since(sent) > 6*time.Second {
			t.Fatal("the listener still accepts 6s after SIGTERM")
		}
		time.Sleep(20 * time.Millisecond) // polling with a deadline
	}
	if since := time.Since(sent); since < 2*time.Second {
		t.Errorf("listener closed %s after SIGTERM, before drain_delay (2s)", since)
	}

	for i, ch := range open {
		var lines []string
		select {
		case lines = <-ch:
		case <-time.After(15 * time.Second):
			t.Fatalf("stream %d did not end 15s after SIGTERM", i)
		}
		last := lines[len(lines)-1]
		var ev struct {
			Error struct{ Code, Type, Message string }
		}
		if err := json.Unmarshal([]byte(strings.TrimPrefix(last, "data: ")), &ev); err != nil || ev.Error.Code != "gateway_draining" {
			t.Errorf("stream %d (%d events) ends with %q, want the gateway_draining error event", i, len(lines), last)
		}
		if strings.Contains(strings.Join(lines, "\n"), "[DONE]") {
			t.Errorf("stream %d: [DONE] after a failure", i)
		}
	}
	a := await(t, whole)
	if a.status != http.StatusServiceUnavailable || !strings.Contains(a.body, `"code":"gateway_draining"`) {
		t.Errorf("unstarted whole answer: %d %s", a.status, a.body)
	}
	if since := time.Since(sent); since < 3*time.Second {
		t.Errorf("running calls stopped %s after SIGTERM, before drain_delay + drain_grace (3s)", since)
	}
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		t.Fatalf("tollgate still running 15s after SIGTERM:\n%s", p.log.String())
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit code %d\n%s", code, p.log.String())
	}
	for _, want := range []string{"draining: /readyz answers 503", "draining: admitting nothing new", "stopped"} {
		if !strings.Contains(p.log.String(), want) {
			t.Errorf("log lacks %q", want)
		}
	}
}

// waitRunning polls /admin/state until n calls run.
func waitRunning(t *testing.T, url string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err := rawClient.Get(url + "/admin/state")
		if err != nil {
			t.Fatal(err)
		}
		var st struct{ Running int }
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if json.Unmarshal(b, &st) == nil && st.Running == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("never saw %d running: %s", n, bytes.TrimSpace(b))
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
}
