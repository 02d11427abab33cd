package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/cmd/internal/fakellm"
)

// The coding agents as clients of the gateway: Codex CLI on /v1/responses and
// Claude Code on /v1/messages, pointed at Tollgate exactly as docs/clients.md says, with Tollgate
// in front of fakellm. Each runs a task that needs one tool call — fakellm (tool-call mode)
// asks it to run `echo tollgate-tool-ok`, then answers from the tool's output — once through
// a backend that speaks chat (the gateway translates both ways) and once through one that
// speaks the agent's own format (the gateway relays). Like cli_test.go they skip when a CLI
// is absent, unless CI is set.

// agent is one coding agent driven as a client.
type agent struct {
	cli   cliKind
	route string // its route, as the log line names it
	// model is the name the agent asks for; native is the backend that speaks its format.
	model, native string
	// command is the agent's command line for a task, pointed at the gateway.
	command func(bin, gatewayURL, model, home, task string) (args, env []string)
	// final reads the agent's last answer from its stdout.
	final func(stdout []byte) string
}

const agentTask = "Run the check command and tell me what it printed."

var agents = []agent{
	{cli: cliKinds[0], route: "/v1/responses", model: "gpt-5-codex", native: "oai",
		command: func(bin, url, model, home, task string) ([]string, []string) {
			// The provider block docs/clients.md shows, as -c overrides.
			return []string{bin, "exec", "--json", "--skip-git-repo-check",
					"-c", `model_provider="tollgate"`,
					"-c", `model_providers.tollgate={name="Tollgate",base_url="` + url + `/v1",wire_api="responses",env_key="TOLLGATE_API_KEY"}`,
					"-m", model, task},
				[]string{"CODEX_HOME=" + home, "TOLLGATE_API_KEY=unused"}
		},
		final: func(out []byte) string {
			text := ""
			for _, line := range bytes.Split(out, []byte("\n")) {
				var ev struct {
					Type string `json:"type"`
					Item struct {
						Type, Text string
					} `json:"item"`
				}
				if json.Unmarshal(line, &ev) == nil && ev.Type == "item.completed" && ev.Item.Type == "agent_message" {
					text = ev.Item.Text
				}
			}
			return text
		}},
	{cli: cliKinds[1], route: "/v1/messages", model: "claude-sonnet-4-5-20250929", native: "ant",
		command: func(bin, url, model, home, task string) ([]string, []string) {
			return []string{bin, "-p", "--output-format", "stream-json", "--verbose", "--allowedTools", "Bash(echo:*)",
					"--model", model, task},
				[]string{"ANTHROPIC_BASE_URL=" + url, "ANTHROPIC_API_KEY=unused"}
		},
		final: func(out []byte) string {
			text := ""
			for _, line := range bytes.Split(out, []byte("\n")) {
				var ev struct {
					Type, Subtype, Result string
				}
				if json.Unmarshal(line, &ev) == nil && ev.Type == "result" && ev.Subtype == "success" {
					text = ev.Result
				}
			}
			return text
		}},
}

// agentConfig puts Tollgate in front of fakellm at url: "chat" speaks Chat Completions,
// "oai" and "ant" speak Responses and Messages and learn their models from fakellm's list.
// The agents' model names lead to "chat" through a model's patterns, or, when native, to
// the same name at "oai" or "ant" through the providers' patterns.
func agentConfig(url string, native bool) string {
	chat, oai, ant := `["gpt-5*", "claude-*"]`, "[]", "[]"
	if native {
		chat, oai, ant = "[]", `["gpt-5*"]`, `["claude-*"]`
	}
	return fmt.Sprintf(`
providers:
  - name: chat
    kind: ollama
    base_url: %[1]s/v1
    models:
      - id: fake-model
        aliases: %[2]s
  - name: oai
    kind: openai
    base_url: %[1]s/v1
    keys: [test-key]
    aliases: %[3]s
  - name: ant
    kind: anthropic
    base_url: %[1]s
    keys: [test-key]
    aliases: %[4]s
`, url, chat, oai, ant)
}

// logLines is a concurrency-safe sink for the gateway's log.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// requests returns the request log lines of route (the chat lines: one per model request).
func (l *logLines) requests(route string) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(l.buf.Bytes()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["route"] == route && m["message"] == "chat" {
			out = append(out, m)
		}
	}
	return out
}

// agentGateway serves fakellm with opts and a gateway in front of it, logging to the returned lines.
func agentGateway(t *testing.T, opts fakellm.Options, native bool) (*gateway, *fakellm.Server, *logLines) {
	t.Helper()
	opts.Models = []string{"fake-model", agents[0].model, agents[1].model}
	fake := fakellm.New(opts)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	logs := &logLines{}
	return serveGateway(t, agentConfig(srv.URL, native), nil, zerolog.New(logs)), fake, logs
}

// agentCmd is the agent's process for a task, in its own process group, with a private HOME
// and working directory, marked so its processes can be found.
func agentCmd(ctx context.Context, t *testing.T, a agent, url, model, marker string) (*exec.Cmd, *bytes.Buffer) {
	home := t.TempDir()
	args, env := a.command(cliBinary(t, a.cli), url, model, home, agentTask)
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = home
	cmd.Env = append(os.Environ(), append(env, "HOME="+home, markerVar+"="+marker)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &prefixWriter{t: t, prefix: a.cli.name + ": "}
	return cmd, &stdout
}

// prefixWriter logs an agent's stderr through the test, for when it fails.
type prefixWriter struct {
	t      *testing.T
	prefix string
}

func (w *prefixWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s%s", w.prefix, strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestAgentsToolCall: each agent finishes its one-tool task through the gateway, with the
// tool call and the tool's output crossing it both ways, and the gateway's log shows both
// of the agent's calls, served by the backend the test meant.
func TestAgentsToolCall(t *testing.T) {
	for _, a := range agents {
		for _, run := range []struct {
			backend string
			native  bool
			served  string
		}{
			{"chat", false, "chat/fake-model"},
			{"native", true, a.native + "/" + a.model},
		} {
			t.Run(a.cli.name+"/"+run.backend, func(t *testing.T) {
				g, fake, logs := agentGateway(t, fakellm.Options{Modes: fakellm.ModeToolCall, Chunks: 4}, run.native)
				ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
				defer cancel()
				marker := newMarker(t)
				cmd, stdout := agentCmd(ctx, t, a, g.URL, a.model, marker)
				if err := cmd.Run(); err != nil {
					t.Fatalf("%s: %v\nstdout:\n%s", a.cli.name, err, stdout)
				}
				if got := a.final(stdout.Bytes()); got != fakellm.ToolDoneReply {
					t.Errorf("final answer %q, want %q\nstdout:\n%s", got, fakellm.ToolDoneReply, stdout)
				}
				lines := logs.requests(a.route)
				if len(lines) != 2 {
					t.Fatalf("%d %s log lines, want the tool call and the answer: %v", len(lines), a.route, lines)
				}
				for _, l := range lines {
					if l["status"] != float64(200) || l["served_model"] != run.served || l["model"] != a.model {
						t.Errorf("log line %v: want status 200, model %q served by %q", l, a.model, run.served)
					}
				}
				if st := fake.Stats(); st.Requests != 2 || st.Completed != 2 {
					t.Errorf("fakellm saw %+v, want 2 calls completed", st)
				}
				g.waitIdle(t)
				waitNoProcesses(t, marker, 5*time.Second)
			})
		}
	}
}

// TestAgentsHangUp: killing an agent mid-answer closes its connection to the gateway, which
// cancels the backend call: fakellm sees its client go, the gateway logs a client disconnect
// and is idle.
func TestAgentsHangUp(t *testing.T) {
	for _, a := range agents {
		t.Run(a.cli.name, func(t *testing.T) {
			// 400 chunks 50 ms apart: a 20 s answer, far from over when the agent is killed.
			g, fake, logs := agentGateway(t, fakellm.Options{Chunks: 400, ChunkInterval: 50 * time.Millisecond}, false)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			marker := newMarker(t)
			cmd, stdout := agentCmd(ctx, t, a, g.URL, a.model, marker)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }() // ends when the agent does: at the latest when it is killed
			deadline := time.Now().Add(30 * time.Second)
			for fake.Stats().Concurrent == 0 || g.Gateway.State().Running == 0 {
				select {
				case err := <-done:
					t.Fatalf("the agent ended before answering: %v\nstdout:\n%s", err, stdout)
				default:
				}
				if time.Now().After(deadline) {
					t.Fatalf("the agent's call never reached the backend: %+v", fake.Stats())
				}
				time.Sleep(5 * time.Millisecond) // polling with a deadline
			}
			if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			<-done
			deadline = time.Now().Add(5 * time.Second)
			for fake.Stats().ClientGone == 0 || fake.Stats().Concurrent != 0 {
				if time.Now().After(deadline) {
					t.Fatalf("the backend call was not cancelled 5s after the kill: %+v", fake.Stats())
				}
				time.Sleep(5 * time.Millisecond) // polling with a deadline
			}
			g.waitIdle(t)
			lines := logs.requests(a.route)
			if len(lines) != 1 || lines[0]["client_disconnect"] != true || lines[0]["status"] != float64(499) {
				t.Errorf("log lines %v, want one client disconnect (499)", lines)
			}
			if st := fake.Stats(); st.Completed != 0 {
				t.Errorf("fakellm stats %+v, want nothing completed", st)
			}
			waitNoProcesses(t, marker, 5*time.Second)
		})
	}
}
