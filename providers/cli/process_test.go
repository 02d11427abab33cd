package cli

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tollgate/tollgate/providers/llm"
)

// fakeCLI returns a backend of kind running testdata/cli/bin/script.
func fakeCLI(t *testing.T, kind, script string, env map[string]string, grace time.Duration) *Backend {
	t.Helper()
	path, err := filepath.Abs(filepath.Join(testdataDir, "bin", script))
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Config{Kind: kind, Name: "fake", Command: path, Env: env, KillGrace: grace})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func recorded(t *testing.T, file string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join(testdataDir, file))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func userRequest(text string) *llm.Request {
	return &llm.Request{Model: "test-model", Messages: []llm.Message{{Role: "user", Content: llm.Content{Text: text}}}}
}

// drain reads s to its end and returns the text and the error that ended it (nil for EOF).
func drain(t *testing.T, s llm.Stream) (string, error) {
	t.Helper()
	var b strings.Builder
	for {
		c, err := s.Next()
		if errors.Is(err, io.EOF) {
			return b.String(), nil
		}
		if err != nil {
			return b.String(), err
		}
		b.WriteString(c.Content)
	}
}

func pgidOf(t *testing.T, s llm.Stream) int {
	t.Helper()
	cs, ok := s.(*stream)
	if !ok {
		t.Fatalf("stream is %T", s)
	}
	return cs.proc.pgid
}

// requireGroupGone fails unless no process of group pgid exists: kill(-pgid, 0) gives ESRCH.
func requireGroupGone(t *testing.T, pgid int) {
	t.Helper()
	if err := syscall.Kill(-pgid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("process group %d still has members (kill: %v)", pgid, err)
	}
}

func TestReplayedRunsAnswer(t *testing.T) {
	tests := []struct{ kind, file, want string }{
		{KindCodex, "codex/success.jsonl", "Hello from the fake 世界 🙂"},
		{KindClaude, "claude/partial_thinking.jsonl", "Hello from the fake 世界 🙂"},
		{KindGemini, "gemini/success.jsonl", "Hello 世界 🙂"},
	}
	for _, tc := range tests {
		t.Run(tc.kind, func(t *testing.T) {
			b := fakeCLI(t, tc.kind, "replay", map[string]string{"FAKE_CLI_STREAM": recorded(t, tc.file)}, 0)
			s, err := b.Open(context.Background(), userRequest("say hi"))
			if err != nil {
				t.Fatal(err)
			}
			first, err := s.Next()
			if err != nil || first.Role != "assistant" {
				t.Fatalf("first chunk %+v, %v: want role assistant", first, err)
			}
			rest, err := drain(t, s)
			if err != nil {
				t.Fatal(err)
			}
			if got := first.Content + rest; got != tc.want {
				t.Errorf("answer %q, want %q", got, tc.want)
			}
			start := time.Now()
			s.Close()
			if d := time.Since(start); d > time.Second {
				t.Errorf("Close after a complete run took %v", d)
			}
			requireGroupGone(t, pgidOf(t, s))
		})
	}
}

func TestChildGetsPromptArgsControlledEnvAndFreshWorkdir(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-stray-gateway-secret-0001")
	t.Setenv("LANG", "C.UTF-8")
	dump := t.TempDir()
	b := fakeCLI(t, KindCodex, "replay", map[string]string{
		"FAKE_CLI_DUMP":   dump,
		"FAKE_CLI_STREAM": recorded(t, "codex/success.jsonl"),
		"RELAY_API_KEY":   "configured-key",
	}, 0)
	req := &llm.Request{Model: "gpt-test", ReasoningEffort: "high", Messages: []llm.Message{
		{Role: "system", Content: llm.Content{Text: "Be brief."}},
		{Role: "user", Content: llm.Content{Text: "Hi"}},
	}}
	s, err := b.Open(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := drain(t, s); err != nil {
		t.Fatal(err)
	}
	s.Close()

	read := func(name string) string {
		data, err := os.ReadFile(filepath.Join(dump, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	args := strings.Split(strings.TrimSpace(read("args")), "\n")
	want := []string{"exec", "--json", "--skip-git-repo-check", "--sandbox", "read-only", "--ephemeral",
		"--color", "never", "--model=gpt-test", "-c", "model_reasoning_effort=high", "-"}
	if strings.Join(args, " ") != strings.Join(want, " ") {
		t.Errorf("args %q, want %q", args, want)
	}
	env := read("env")
	if strings.Contains(env, "sk-stray") {
		t.Error("the gateway's own OPENAI_API_KEY reached the CLI")
	}
	for _, kv := range []string{"RELAY_API_KEY=configured-key", "LANG=C.UTF-8", "PATH="} {
		if !strings.Contains(env, kv) {
			t.Errorf("env lacks %s:\n%s", kv, env)
		}
	}
	if got, want := read("stdin"), "<system>\nBe brief.\n</system>\n\nHi"; got != want {
		t.Errorf("stdin %q, want %q", got, want)
	}
	wd := strings.TrimSpace(read("pwd"))
	if !strings.Contains(filepath.Base(wd), "tollgate-codex-cli-") {
		t.Errorf("workdir %q is not a fresh per-request directory", wd)
	}
	if _, err := os.Stat(wd); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("workdir %q still exists after Close (%v)", wd, err)
	}
}

func TestCancelStopsHangingCLIAndItsChildren(t *testing.T) {
	b := fakeCLI(t, KindCodex, "hang", nil, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := b.Open(ctx, userRequest("hang"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Next()
	if err != nil || c.Content != "partial answer" {
		t.Fatalf("first chunk %+v, %v", c, err)
	}
	cancel()
	if _, err := drain(t, s); !errors.Is(err, context.Canceled) {
		t.Fatalf("after cancel: %v, want context.Canceled", err)
	}
	s.Close()
	requireGroupGone(t, pgidOf(t, s))
}

func TestCancelBeforeFirstChunk(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "pid")
	b := fakeCLI(t, KindCodex, "hang", map[string]string{"FAKE_CLI_SILENT": "1", "FAKE_CLI_PIDFILE": pidfile}, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan int, 1)
	go func() { // exits once the pid file appears or after its deadline
		defer cancel()
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if data, err := os.ReadFile(pidfile); err == nil && len(data) > 0 {
				pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
				started <- pid
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		started <- 0
	}()
	s, err := b.Open(ctx, userRequest("hang"))
	if s != nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("Open = %v, %v; want context.Canceled", s, err)
	}
	pid := <-started
	if pid == 0 {
		t.Fatal("the fake CLI never started")
	}
	requireGroupGone(t, pid) // the shell is its group's leader
}

func TestCloseStopsRunningCLI(t *testing.T) {
	b := fakeCLI(t, KindCodex, "hang", nil, 0)
	s, err := b.Open(context.Background(), userRequest("hang"))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	s.Close()
	if d := time.Since(start); d >= DefaultKillGrace {
		t.Errorf("Close took %v; a CLI that honours SIGTERM should not need the grace period", d)
	}
	requireGroupGone(t, pgidOf(t, s))
	if _, err := s.Next(); err == nil {
		t.Error("Next after Close returned no error")
	}
	s.Close() // again: harmless
}

func TestCLIIgnoringSIGTERMIsKilledAfterGrace(t *testing.T) {
	const grace = 300 * time.Millisecond
	b := fakeCLI(t, KindCodex, "ignore-term", nil, grace)
	ctx, cancel := context.WithCancel(context.Background())
	s, err := b.Open(ctx, userRequest("x"))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cancel()
	s.Close()
	if d := time.Since(start); d < grace {
		t.Errorf("Close returned after %v, before the grace period: the CLI cannot have been SIGKILLed", d)
	}
	requireGroupGone(t, pgidOf(t, s))
	if st := s.(*stream).proc.exitDescription(); st != "killed by signal 9" {
		t.Errorf("exit: %s, want killed by SIGKILL", st)
	}
}

func TestMultiByteCharactersSplitAcrossWrites(t *testing.T) {
	b := fakeCLI(t, KindCodex, "split-utf8", nil, 0)
	s, err := b.Open(context.Background(), userRequest("x"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := drain(t, s)
	if err != nil {
		t.Fatal(err)
	}
	want := "世界 🙂\n\n" + strings.Repeat("a", 200000)
	if got != want || !utf8.ValidString(got) {
		t.Errorf("answer %.40q... (%d bytes), want %.40q... (%d bytes)", got, len(got), want, len(want))
	}
}

func TestFailedRuns(t *testing.T) {
	tests := []struct {
		name     string
		kind     string
		env      map[string]string
		wantKind llm.Kind
		inMsg    string
		fromOpen bool
	}{
		{name: "turn.failed then exit 1", kind: KindCodex, wantKind: llm.KindUpstreamRateLimited,
			env:   map[string]string{"FAKE_CLI_STREAM": "codex/rate_limited.jsonl", "FAKE_CLI_EXIT": "1"},
			inMsg: "429", fromOpen: true},
		{name: "exit 1 with only stderr", kind: KindClaude, wantKind: llm.KindUpstreamAuth,
			env: map[string]string{"FAKE_CLI_EXIT": "1",
				"FAKE_CLI_STDERR": "Error: Not logged in (key sk-abcdefghijklmnopqrstu rejected)"},
			inMsg: "exit status 1", fromOpen: true},
		{name: "usage error keeps the error line", kind: KindCodex, wantKind: llm.KindUpstream,
			env: map[string]string{"FAKE_CLI_EXIT": "2", "FAKE_CLI_STDERR": "error: the argument '--skip-git-repo-check' cannot be used multiple times\n\n" +
				"Usage: codex exec [OPTIONS] <COMMAND> [ARGS]\n\nFor more information, try '--help'."},
			inMsg: "exit status 2: error: the argument '--skip-git-repo-check' cannot be used multiple times | " +
				"Usage: codex exec [OPTIONS] <COMMAND> [ARGS] | For more information, try '--help'.", fromOpen: true},
		{name: "exit 0 without final event", kind: KindCodex, wantKind: llm.KindUpstreamTruncated,
			env:   map[string]string{"FAKE_CLI_STREAM": "codex/no_final.jsonl"},
			inMsg: "without turn.completed"},
		{name: "claude retries a bad key", kind: KindClaude, wantKind: llm.KindUpstreamAuth,
			env:   map[string]string{"FAKE_CLI_STREAM": "claude/auth_retrying.jsonl"},
			inMsg: "authentication_failed", fromOpen: true},
		{name: "gemini quota", kind: KindGemini, wantKind: llm.KindUpstreamQuota,
			env:   map[string]string{"FAKE_CLI_STREAM": "gemini/quota_error.jsonl", "FAKE_CLI_EXIT": "1"},
			inMsg: "quota", fromOpen: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if f := tc.env["FAKE_CLI_STREAM"]; f != "" {
				tc.env["FAKE_CLI_STREAM"] = recorded(t, f)
			}
			var logged string
			b := fakeCLI(t, tc.kind, "replay", tc.env, 0)
			b.cfg.OnStderr = func(s string) { logged = s }
			s, err := b.Open(context.Background(), userRequest("x"))
			if tc.fromOpen != (err != nil) {
				t.Fatalf("Open error %v, want an error from Open: %v", err, tc.fromOpen)
			}
			if err == nil {
				_, err = drain(t, s)
				s.Close()
			}
			var e *llm.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v (%T), want *llm.Error", err, err)
			}
			if e.Kind != tc.wantKind || e.Provider != "fake" || !strings.Contains(e.Message, tc.inMsg) {
				t.Errorf("error %v, want kind %v mentioning %q", e, tc.wantKind, tc.inMsg)
			}
			if strings.Contains(e.Message, "sk-abc") || strings.Contains(logged, "sk-abc") {
				t.Errorf("a key leaked: message %q, log %q", e.Message, logged)
			}
			if stderr := tc.env["FAKE_CLI_STDERR"]; stderr != "" && !strings.Contains(logged, stderr[:12]) { // its start: the rest may be redacted
				t.Errorf("OnStderr got %q", logged)
			}
		})
	}
}

// TestRunTimeout: a deadline that passes while the CLI hangs in the middle of its answer
// ends the stream with context.DeadlineExceeded and leaves nothing of its process group.
// The deadline passes once Open has returned: a clock started before Open would race the
// fake CLI's start-up, which a loaded machine can make longer than any fixed clock.
func TestRunTimeout(t *testing.T) {
	b := fakeCLI(t, KindCodex, "hang", nil, 0)
	ctx, pass := manualDeadline()
	defer pass()
	s, err := b.Open(ctx, userRequest("x"))
	if err != nil {
		t.Fatal(err)
	}
	pass()
	if _, err := drain(t, s); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want context.DeadlineExceeded", err)
	}
	s.Close()
	requireGroupGone(t, pgidOf(t, s))
}

// manualDeadline returns a context whose deadline passes when pass is called: its Done
// closes and its Err is context.DeadlineExceeded from then on, as a deadline's would be.
func manualDeadline() (ctx context.Context, pass func()) {
	inner, cancel := context.WithCancel(context.Background())
	return passedDeadline{inner}, cancel
}

// passedDeadline is manualDeadline's context: its inner context is cancelled by pass.
type passedDeadline struct{ context.Context }

func (d passedDeadline) Err() error {
	if d.Context.Err() != nil {
		return context.DeadlineExceeded
	}
	return nil
}

func TestOpenRejects(t *testing.T) {
	b := fakeCLI(t, KindCodex, "replay", nil, 0)
	missing, err := New(Config{Kind: KindClaude, Command: "tollgate-no-such-cli"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		b    *Backend
		req  *llm.Request
		want llm.Kind
	}{
		{"no messages", b, &llm.Request{Model: "m"}, llm.KindInvalidRequest},
		{"flag as model", b, &llm.Request{Model: "--dangerously-bypass-approvals-and-sandbox",
			Messages: userRequest("x").Messages}, llm.KindInvalidRequest},
		{"unknown role", b, &llm.Request{Messages: []llm.Message{{Role: "robot"}}}, llm.KindInvalidRequest},
		{"CLI not installed", missing, userRequest("x"), llm.KindProviderUnavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := tc.b.Open(context.Background(), tc.req)
			if s != nil || llm.KindOf(err) != tc.want {
				t.Errorf("Open = %v, %v; want kind %v", s, err, tc.want)
			}
		})
	}
}

func TestNewValidates(t *testing.T) {
	for _, cfg := range []Config{
		{Kind: "openai"},
		{Kind: KindCodex, KillGrace: -time.Second},
		{Kind: KindCodex, Env: map[string]string{"A=B": "x"}},
		{Kind: KindCodex, Workdir: "/nonexistent/tollgate"},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}

func TestConcurrentRunsAreIndependent(t *testing.T) {
	b := fakeCLI(t, KindClaude, "replay", map[string]string{"FAKE_CLI_STREAM": recorded(t, "claude/partial_thinking.jsonl")}, 0)
	const n = 4
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() { // exits when its run is read and closed
			s, err := b.Open(context.Background(), userRequest("x"))
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			got, err := drain(t, s)
			if err == nil && got != "Hello from the fake 世界 🙂" {
				err = errors.New("answer " + got)
			}
			errs <- err
		}()
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
