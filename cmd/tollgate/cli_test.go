package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"

	"github.com/tollgate/tollgate/cmd/internal/fakellm"
)

// Gateway tests with the real coding-agent CLIs: Codex CLI and Claude Code, as
// installed by .ci/install-clis, run by the gateway's CLI providers against fakellm on
// loopback, and driven through the gateway's HTTP API with the official openai-go client.
// They skip when a CLI is absent, unless CI is set: then absence fails.

// cliKind is one CLI under test.
type cliKind struct {
	name   string // provider name
	kind   string // provider kind
	envVar string // overrides where the executable is
	bin    string // its name under .tools/node_modules/.bin
	// minContent is how many content deltas a streamed answer has at least: Claude Code
	// relays token deltas, Codex prints an agent message only once it is whole.
	minContent int
	// streamsTokens: a hang-up test can wait for the first content chunk; for Codex it
	// waits until fakellm has seen the CLI's request instead.
	streamsTokens bool
}

const (
	cliReply  = "Tollgate relays 世界 through a real CLI, chunk by chunk."
	cliChunks = 6
)

var cliKinds = []cliKind{
	{name: "codex", kind: "codex-cli", envVar: "TOLLGATE_CODEX_BIN", bin: "codex", minContent: 1},
	{name: "claude", kind: "claude-cli", envVar: "TOLLGATE_CLAUDE_BIN", bin: "claude", minContent: cliChunks, streamsTokens: true},
}

// cliBinary finds a CLI: $envVar, else <repo>/.tools/node_modules/.bin/<bin>.
func cliBinary(t *testing.T, k cliKind) string {
	t.Helper()
	p := os.Getenv(k.envVar)
	if p == "" {
		p, _ = filepath.Abs(filepath.Join("..", "..", ".tools", "node_modules", ".bin", k.bin))
	}
	if st, err := os.Stat(p); err != nil || st.IsDir() {
		msg := fmt.Sprintf("%s not installed at %s (run .ci/install-clis or set %s)", k.bin, p, k.envVar)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return p
}

// tappedFake is fakellm behind a tap that follows its generation calls per model (fakellm
// counts only in total), so a test can tell which model's CLI was talking to it when.
type tappedFake struct {
	*fakellm.Server
	URL string

	arrived chan string // the model of each generation call, as it arrives
	// follow maps a model to another: a call for the first is held open, before fakellm
	// answers it, until a call for the second is in flight too (or followWait passes). How
	// soon each CLI gets to its call varies with the machine's load; holding the call makes
	// "both models' CLIs talked to the backend at once" a question of lanes, not of timing.
	follow map[string]string

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced whenever inFlight changes
	inFlight map[string]int
	maxIn    map[string]int // highest inFlight per model
	calls    map[string]int
	mixed    bool // calls of two models were in flight at the same moment
}

// followWait bounds how long a following call is held: a gateway that never runs the two
// models together fails the test on "mixed" instead of hanging it.
const followWait = 20 * time.Second

// newTappedFake serves fakellm with opts behind the tap; follow is tappedFake.follow (set
// here, before the server runs: the calls reach it from other processes, out of sight of
// the race detector).
func newTappedFake(t *testing.T, opts fakellm.Options, follow map[string]string) *tappedFake {
	f := &tappedFake{Server: fakellm.New(opts), follow: follow, arrived: make(chan string, 64), changed: make(chan struct{}),
		inFlight: map[string]int{}, maxIn: map[string]int{}, calls: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	return f
}

func (f *tappedFake) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || (r.URL.Path != "/v1/messages" && r.URL.Path != "/v1/responses") {
		f.Server.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // the CLI went away while sending
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var req struct {
		Model string `json:"model"`
	}
	_ = json.Unmarshal(body, &req) // fakellm answers a bad body itself
	f.enter(req.Model)
	defer f.leave(req.Model)
	select {
	case f.arrived <- req.Model:
	default:
	}
	if other, ok := f.follow[req.Model]; ok {
		f.awaitInFlight(r.Context(), other)
	}
	f.Server.ServeHTTP(w, r)
}

// awaitInFlight returns once a call for model is in flight, ctx ends or followWait passes.
func (f *tappedFake) awaitInFlight(ctx context.Context, model string) {
	timeout := time.NewTimer(followWait)
	defer timeout.Stop()
	for {
		f.mu.Lock()
		busy, changed := f.inFlight[model] > 0, f.changed
		f.mu.Unlock()
		if busy {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		case <-timeout.C:
			return
		}
	}
}

// notify wakes the calls waiting in awaitInFlight; f.mu is held.
func (f *tappedFake) notify() {
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *tappedFake) enter(model string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[model]++
	f.inFlight[model]++
	f.maxIn[model] = max(f.maxIn[model], f.inFlight[model])
	busy := 0
	for _, n := range f.inFlight {
		if n > 0 {
			busy++
		}
	}
	f.mixed = f.mixed || busy > 1
	f.notify()
}

func (f *tappedFake) leave(model string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inFlight[model]--
	f.notify()
}

// tapCounts is what the tap saw, copied.
type tapCounts struct {
	calls, maxIn map[string]int
	mixed        bool
}

func (f *tappedFake) counts() tapCounts {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := tapCounts{calls: map[string]int{}, maxIn: map[string]int{}, mixed: f.mixed}
	for k, v := range f.calls {
		c.calls[k] = v
	}
	for k, v := range f.maxIn {
		c.maxIn[k] = v
	}
	return c
}

// newMarker returns a value unique to one test, put into the CLI's environment so its
// processes can be found.
func newMarker(t *testing.T) string {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "tollgate-e2e-" + hex.EncodeToString(b)
}

// markerVar names the variable carrying the marker in each CLI's environment.
const markerVar = "TOLLGATE_TEST_MARKER"

// cliConfig is a gateway config with one provider running k against fake, models model-a
// (model_lanes 1) and model-b (model_lanes 2) on 3 lanes. Codex is pointed at fakellm
// through a custom Responses provider given with -c overrides, Claude Code through
// ANTHROPIC_BASE_URL; both get a private empty HOME so no login or setting of this machine
// takes part.
func cliConfig(t *testing.T, k cliKind, fakeURL, marker string) string {
	t.Helper()
	home := t.TempDir()
	var args []string
	env := map[string]string{"HOME": home, markerVar: marker}
	switch k.kind {
	case "codex-cli":
		env["CODEX_HOME"] = home
		env["TOLLGATE_TEST_KEY"] = "test-key"
		args = []string{"-c", "model_provider=mock", "-c", `model_providers.mock={name="mock",base_url="` +
			fakeURL + `/v1",wire_api="responses",env_key="TOLLGATE_TEST_KEY",stream_max_retries=0,request_max_retries=0}`}
	case "claude-cli":
		env["ANTHROPIC_BASE_URL"] = fakeURL
		env["ANTHROPIC_API_KEY"] = "test-key"
	}
	// JSON is YAML: it quotes the paths, the TOML in the codex overrides and the env.
	js := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	return fmt.Sprintf(`
providers:
  - name: %s
    kind: %s
    command: %s
    args: %s
    env: %s
    kill_grace: 2s
    lanes: 3
    model_lanes: 1
    models:
      - id: model-a
      - id: model-b
        model_lanes: 2
`, k.name, k.kind, js(cliBinary(t, k)), js(args), js(env))
}

// markedProcesses counts the live processes whose environment carries marker, by scanning
// /proc/*/environ. The environment is inherited, so this finds the CLI, whatever wrapper it
// runs through (codex is a node script starting a native binary), and anything it started;
// zombies have an empty environ and do not count.
func markedProcesses(t *testing.T, marker string) int {
	t.Helper()
	dirs, err := filepath.Glob("/proc/[0-9]*/environ")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("cannot list /proc: %v", err)
	}
	want := []byte(markerVar + "=" + marker + "\x00")
	n := 0
	for _, p := range dirs {
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, want) {
			n++
		}
	}
	return n
}

// waitNoProcesses polls until no marked process is left, and returns how long that took.
func waitNoProcesses(t *testing.T, marker string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		n := markedProcesses(t, marker)
		if n == 0 {
			return time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("%d CLI processes still alive %v later", n, within)
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
}

// streamed is what a streamed chat answer carried.
type streamed struct {
	text, reasoning string
	chunks          int // all chunks
	content         int // chunks with content
	finish          string
	usage           oai.CompletionUsage
	err             error
}

// readStream reads a streamed answer; firstContent, if set, is closed at the first content.
func readStream(s interface {
	Next() bool
	Current() oai.ChatCompletionChunk
	Err() error
}, firstContent chan struct{}) streamed {
	var r streamed
	var text, reasoning strings.Builder
	for s.Next() {
		ch := s.Current()
		r.chunks++
		if ch.Usage.TotalTokens > 0 {
			r.usage = ch.Usage
		}
		if len(ch.Choices) == 0 {
			continue
		}
		d := ch.Choices[0].Delta
		if d.Content != "" {
			if r.content == 0 && firstContent != nil {
				close(firstContent)
			}
			r.content++
			text.WriteString(d.Content)
		}
		if rc, ok := d.JSON.ExtraFields["reasoning_content"]; ok {
			var v string
			_ = json.Unmarshal([]byte(rc.Raw()), &v)
			reasoning.WriteString(v)
		}
		if f := ch.Choices[0].FinishReason; f != "" {
			r.finish = f
		}
	}
	r.text, r.reasoning, r.err = text.String(), reasoning.String(), s.Err()
	return r
}

// TestCLIAnswers: each CLI's answer reaches an openai-go client exactly as fakellm wrote it,
// in chunks when streamed, and whole otherwise.
func TestCLIAnswers(t *testing.T) {
	for _, k := range cliKinds {
		t.Run(k.name, func(t *testing.T) {
			fake := newTappedFake(t, fakellm.Options{Reply: cliReply, Chunks: cliChunks, ChunkInterval: 5 * time.Millisecond}, nil)
			marker := newMarker(t)
			g := startGateway(t, cliConfig(t, k, fake.URL, marker), nil)
			c := sdkClient(g.URL)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()

			p := userParams(k.name + "/model-a")
			p.StreamOptions = oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)}
			r := readStream(c.Chat.Completions.NewStreaming(ctx, p), nil)
			if r.err != nil {
				t.Fatalf("stream: %v (after %q)", r.err, r.text)
			}
			// Beside the content: the role, the reasoning (both CLIs ask for it and fakellm
			// then thinks aloud), the finish and the usage each come in a chunk.
			if r.text != cliReply || r.content < k.minContent || r.finish != "stop" || r.reasoning == "" || r.chunks < r.content+3 {
				t.Errorf("stream: text %q in %d content chunks of %d, reasoning %q, finish %q; want %q in ≥%d, reasoning, stop",
					r.text, r.content, r.chunks, r.reasoning, r.finish, cliReply, k.minContent)
			}
			// One completion token per fakellm chunk: the usage is the backend's, relayed.
			if r.usage.CompletionTokens < cliChunks {
				t.Errorf("stream usage %+v, want ≥ %d completion tokens", r.usage, cliChunks)
			}
			t.Logf("stream: %d chunks, %d with content, reasoning %q, usage %d+%d",
				r.chunks, r.content, r.reasoning, r.usage.PromptTokens, r.usage.CompletionTokens)

			res, err := c.Chat.Completions.New(ctx, userParams(k.name+"/model-a"))
			if err != nil {
				t.Fatalf("non-streaming: %v", err)
			}
			if got := res.Choices[0].Message.Content; got != cliReply || res.Choices[0].FinishReason != "stop" {
				t.Errorf("non-streaming: %q finish %q", got, res.Choices[0].FinishReason)
			}
			if res.Usage.CompletionTokens < cliChunks {
				t.Errorf("non-streaming usage %+v", res.Usage)
			}

			// Each answer was one CLI run making one call, for the model the client named.
			if got := fake.counts().calls; got["model-a"] != 2 || len(got) != 1 {
				t.Errorf("fakellm calls per model %v, want model-a: 2", got)
			}
			if st := fake.Stats(); st.Completed != 2 || st.ClientGone != 0 {
				t.Errorf("fakellm stats %+v, want 2 completed", st)
			}
			g.waitIdle(t)
			waitNoProcesses(t, marker, 5*time.Second)
		})
	}
}

// TestCLIHangUpEndsTheProcess: a client that hangs up mid-answer leaves no CLI process
// alive within 5 s, the gateway idle, and fakellm seeing the CLI go.
func TestCLIHangUpEndsTheProcess(t *testing.T) {
	for _, k := range cliKinds {
		t.Run(k.name, func(t *testing.T) {
			// 400 chunks 50 ms apart: a 20 s answer, far from over when the client leaves.
			fake := newTappedFake(t, fakellm.Options{Chunks: 400, ChunkInterval: 50 * time.Millisecond}, nil)
			marker := newMarker(t)
			g := startGateway(t, cliConfig(t, k, fake.URL, marker), nil)
			c := sdkClient(g.URL)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()

			firstContent := make(chan struct{})
			done := make(chan streamed, 1)
			go func() { // ends when the stream does: at the latest when ctx is cancelled
				done <- readStream(c.Chat.Completions.NewStreaming(ctx, userParams(k.name+"/model-a")), firstContent)
			}()
			ready := (<-chan struct{})(firstContent)
			if !k.streamsTokens {
				arrived := make(chan struct{})
				go func() { // ends with the call's arrival or the test
					select {
					case <-fake.arrived:
						close(arrived)
					case <-ctx.Done():
					}
				}()
				ready = arrived
			}
			select {
			case <-ready:
			case r := <-done:
				t.Fatalf("the answer ended before the hang-up: %q, %v", r.text, r.err)
			case <-time.After(30 * time.Second):
				t.Fatal("the answer never started")
			}
			// The scan must see the CLI while it answers, or its zero below proves nothing.
			alive := markedProcesses(t, marker)
			if alive == 0 {
				t.Fatal("no marked process while the CLI answers: the /proc scan finds nothing")
			}

			cancel()
			select {
			case r := <-done:
				if r.err == nil {
					t.Errorf("stream ended without error after the hang-up: %q", r.text)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the client's stream did not end within 5s of cancelling")
			}
			gone := waitNoProcesses(t, marker, 5*time.Second)
			t.Logf("%d CLI processes alive at the hang-up; none left %v later", alive, gone.Round(time.Millisecond))
			g.waitIdle(t)

			deadline := time.Now().Add(5 * time.Second)
			for fake.Stats().ClientGone == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("fakellm never saw the CLI go: %+v", fake.Stats())
				}
				time.Sleep(5 * time.Millisecond) // polling with a deadline
			}
			if st := fake.Stats(); st.Completed != 0 || st.Concurrent != 0 {
				t.Errorf("fakellm stats %+v, want nothing completed or running", st)
			}
		})
	}
}

// adminState is the part of GET /admin/state this file reads.
type adminState struct {
	Providers []struct {
		Name    string `json:"name"`
		Running int    `json:"running"`
		Models  []struct {
			ID      string `json:"id"`
			Running int    `json:"running"`
			Queued  int    `json:"queued"`
		} `json:"models"`
	} `json:"providers"`
}

func getAdminState(t *testing.T, url string) adminState {
	t.Helper()
	res, err := rawClient.Get(url + "/admin/state")
	if err != nil {
		t.Fatalf("admin state: %v", err)
	}
	defer res.Body.Close()
	var st adminState
	if err := json.NewDecoder(res.Body).Decode(&st); err != nil || res.StatusCode != 200 {
		t.Fatalf("admin state: status %d, %v", res.StatusCode, err)
	}
	return st
}

// laneSamples are the extremes seen over samples of /admin/state.
type laneSamples struct {
	n                            int
	maxRunA, maxQueuedA, maxRunB int
	maxProvider                  int
	bBesideA                     bool // model-b running while model-a runs
}

func (s *laneSamples) add(st adminState, provider string) {
	s.n++
	for _, p := range st.Providers {
		if p.Name != provider {
			continue
		}
		s.maxProvider = max(s.maxProvider, p.Running)
		var runA, runB int
		for _, m := range p.Models {
			switch m.ID {
			case provider + "/model-a":
				runA = m.Running
				s.maxRunA = max(s.maxRunA, m.Running)
				s.maxQueuedA = max(s.maxQueuedA, m.Queued)
			case provider + "/model-b":
				runB = m.Running
				s.maxRunB = max(s.maxRunB, m.Running)
			}
		}
		s.bBesideA = s.bBesideA || (runA > 0 && runB > 0)
	}
}

// TestCLIModelLanes: four requests at once for one model of a CLI run one at a time
// (model_lanes 1) while another model of the same CLI runs beside them. The evidence is
// sampled, never timed: /admin/state while they run, and the calls fakellm saw per model.
// model-b's calls are held open until a model-a call is in flight (tappedFake.follow): a
// gateway that ran the models one after the other would leave them waiting for nothing.
func TestCLIModelLanes(t *testing.T) {
	for _, k := range cliKinds {
		t.Run(k.name, func(t *testing.T) {
			// 10 chunks 50 ms apart: each call lasts about half a second or more, long
			// enough for the others to queue behind it and for samples to see it.
			fake := newTappedFake(t, fakellm.Options{Reply: cliReply, Chunks: 10, ChunkInterval: 50 * time.Millisecond},
				map[string]string{"model-b": "model-a"})
			marker := newMarker(t)
			g := startGateway(t, cliConfig(t, k, fake.URL, marker), nil)
			c := sdkClient(g.URL)
			ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
			defer cancel()

			models := []string{"model-a", "model-a", "model-a", "model-a", "model-b", "model-b"}
			type result struct {
				model, text string
				err         error
			}
			results := make(chan result, len(models))
			for _, m := range models {
				go func() { // ends with the request
					res, err := c.Chat.Completions.New(ctx, userParams(k.name+"/"+m))
					r := result{model: m, err: err}
					if err == nil {
						r.text = res.Choices[0].Message.Content
					}
					results <- r
				}()
			}

			var s laneSamples
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			for got := 0; got < len(models); {
				select {
				case r := <-results:
					got++
					if r.err != nil || r.text != cliReply {
						t.Errorf("%s: %q, %v", r.model, r.text, r.err)
					}
				case <-tick.C: // sampling while they run, not synchronisation
					s.add(getAdminState(t, g.URL), k.name)
				case <-ctx.Done():
					t.Fatalf("%d of %d answers after 45s", got, len(models))
				}
			}
			t.Logf("%d samples: model-a running ≤%d queued ≤%d, model-b running ≤%d, provider running ≤%d, b beside a %v",
				s.n, s.maxRunA, s.maxQueuedA, s.maxRunB, s.maxProvider, s.bBesideA)
			// All four model-a calls may be seen waiting for the instant before the first
			// one's start is granted; never fewer than three once one runs.
			if s.maxRunA != 1 || s.maxQueuedA < 3 || s.maxQueuedA > 4 || s.maxRunB != 2 || !s.bBesideA || s.maxProvider > 3 {
				t.Errorf("want model-a running 1 with 3 queued, model-b running 2 beside it, provider ≤ 3 lanes")
			}

			// The backend agrees: model-a's CLIs never called at the same time; model-b's
			// called while one of them did.
			tc := fake.counts()
			t.Logf("fakellm calls %v, most in flight at once %v, models overlapped %v", tc.calls, tc.maxIn, tc.mixed)
			if tc.calls["model-a"] != 4 || tc.calls["model-b"] != 2 || tc.maxIn["model-a"] != 1 ||
				tc.maxIn["model-b"] > 2 || !tc.mixed {
				t.Errorf("fakellm saw calls %v, at most %v at once, overlap %v; want model-a 4 one at a time, model-b 2 beside",
					tc.calls, tc.maxIn, tc.mixed)
			}
			g.waitIdle(t)
			waitNoProcesses(t, marker, 5*time.Second)
		})
	}
}
