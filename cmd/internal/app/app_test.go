package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/tollgate/tollgate/actors"
	"github.com/tollgate/tollgate/cmd/internal/config"
	"github.com/tollgate/tollgate/providers/llm"
)

func TestMain(m *testing.M) {
	switch os.Getenv(tuneGCChild) { // TestTuneGC's and TestHeapFloor's children
	case "1":
		g := TuneGC()
		fmt.Printf("%d %d %s %v\n", g.Percent, g.MemoryLimit, g.LimitFrom, g.Err)
		os.Exit(0)
	case "floor":
		heapFloorChild()
		os.Exit(0)
	}
	// Every refresh goroutine must have ended once its App is drained. protoactor's
	// dead-letter throttle parks a goroutine for a moment after a shutdown; it ends by itself.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
}

// backend is an OpenAI-compatible server on loopback whose model list the test changes.
type backend struct {
	*httptest.Server
	mu      sync.Mutex
	models  []string
	ctx     map[string]int // context_length it reports per model
	fail    bool           // answer the model list with a 500
	hang    bool           // answer the model list only when the client gives up
	lists   atomic.Int32   // model list requests seen
	chatted chan string    // model of each chat request
}

func newBackend(t *testing.T, models ...string) *backend {
	b := &backend{models: models, ctx: map[string]int{}, chatted: make(chan string, 16)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", b.list)
	mux.HandleFunc("POST /v1/chat/completions", b.chat)
	b.Server = httptest.NewServer(mux)
	t.Cleanup(b.Close)
	return b
}

func (b *backend) setModels(models ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.models = models
}

func (b *backend) list(w http.ResponseWriter, r *http.Request) {
	b.lists.Add(1) // on arrival: a client that got an answer was counted
	b.mu.Lock()
	fail, hang := b.fail, b.hang
	var data []map[string]any
	for _, id := range b.models {
		m := map[string]any{"id": id, "object": "model", "owned_by": "test"}
		if n := b.ctx[id]; n > 0 {
			m["context_length"] = n
		}
		data = append(data, m)
	}
	b.mu.Unlock()
	switch {
	case hang:
		<-r.Context().Done()
		return
	case fail:
		http.Error(w, `{"error":{"message":"list broken","type":"server_error"}}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data})
}

func (b *backend) chat(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model string `json:"model"`
	}
	body, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(body, &req)
	b.chatted <- req.Model
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","created":1,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":"hi from %s"},"finish_reason":"stop"}]}`,
		req.Model, req.Model)
}

// start wires an App from YAML with the provider "p" pointed at the backend, and drains it
// at the end of the test.
func start(t *testing.T, b *backend, providerYAML string) *App {
	t.Helper()
	yaml := fmt.Sprintf("providers:\n  - name: p\n    kind: openai\n    base_url: %s/v1\n    keys: [test-key]\n%s", b.URL, providerYAML)
	cfg, err := config.Parse("test.yaml", []byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	a, err := New(context.Background(), cfg, Options{StateDir: t.TempDir(), Logger: zerolog.Nop(), DiscoveryTimeout: 2 * time.Second})
	if err != nil {
		t.Fatalf("app: %v", err)
	}
	drainAtEnd(t, a)
	return a
}

// drainAtEnd drains a when the test ends, failing it if the drain does not finish in time.
func drainAtEnd(t *testing.T, a *App) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := a.Drain(ctx); err != nil {
			t.Errorf("drain: %v", err)
		}
	})
}

func cards(a *App) map[string]llm.ModelCard {
	out := map[string]llm.ModelCard{}
	for _, c := range a.Gateway.Models() {
		out[c.ID] = c
	}
	return out
}

func ids(a *App) []string {
	var out []string
	for _, c := range a.Gateway.Models() {
		out = append(out, c.ID)
	}
	return out
}

// show renders a card's knowledge compactly: ctx/out/reasoning/tools/vision, "-" = null.
func show(s llm.Spec) string {
	i := func(p *int) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprint(*p)
	}
	b := func(p *bool) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprint(*p)
	}
	return strings.Join([]string{i(s.ContextWindow), i(s.MaxOutputTokens), b(s.Reasoning), b(s.Tools), b(s.Vision)}, "/")
}

func TestStartMergesConfigBackendAndCatalog(t *testing.T) {
	b := newBackend(t, "gpt-4o", "tuned", "extra", "o3")
	b.ctx["tuned"], b.ctx["extra"], b.ctx["o3"] = 999, 4096, 12345
	a := start(t, b, `    model_lanes: 2
    refresh_models: 0s
    models:
      - id: tuned
        model_lanes: 1
        max_output_tokens: 100
      - id: o3
        context_window: 50000
        tools: false
      - id: only-configured
`)
	got := cards(a)
	for id, want := range map[string]struct {
		spec  string
		lanes int
	}{
		"p/tuned":           {"999/100/-/-/-", 1},                // config's max output, the backend's context
		"p/o3":              {"50000/100000/true/false/true", 2}, // config, then the catalog; the backend's context loses to config
		"p/only-configured": {"-/-/-/-/-", 2},                    // served though the backend does not list it
		"p/gpt-4o":          {"128000/16384/false/true/true", 2}, // listed only: the catalog
		"p/extra":           {"4096/-/-/-/-", 2},                 // listed only: the backend's context, the rest unknown
	} {
		c, ok := got[id]
		if !ok {
			t.Errorf("%s missing from %v", id, ids(a))
			continue
		}
		if s := show(c.Spec); s != want.spec || c.Spec.ModelLanes != want.lanes {
			t.Errorf("%s: %s lanes %d, want %s lanes %d", id, s, c.Spec.ModelLanes, want.spec, want.lanes)
		}
	}
	if len(got) != 5 {
		t.Errorf("cards %v, want 5", ids(a))
	}
}

// A backend whose list fails or hangs costs the start a bounded wait and nothing else.
func TestStartSurvivesAFailingList(t *testing.T) {
	for _, mode := range []string{"fail", "hang"} {
		t.Run(mode, func(t *testing.T) {
			b := newBackend(t, "x")
			b.fail, b.hang = mode == "fail", mode == "hang"
			yaml := fmt.Sprintf("providers:\n  - name: p\n    kind: openai\n    base_url: %s/v1\n    keys: [k]\n    refresh_models: 0s\n    models: [{id: mine}]\n", b.URL)
			cfg, err := config.Parse("test.yaml", []byte(yaml), func(string) (string, bool) { return "", false })
			if err != nil {
				t.Fatal(err)
			}
			began := time.Now()
			a, err := New(context.Background(), cfg, Options{StateDir: t.TempDir(), Logger: zerolog.Nop(), DiscoveryTimeout: 200 * time.Millisecond})
			if err != nil {
				t.Fatalf("a failing list is fatal: %v", err)
			}
			defer a.Drain(context.Background())
			if d := time.Since(began); d > 3*time.Second {
				t.Errorf("start took %v with a 200ms discovery timeout", d)
			}
			if got := ids(a); !slices.Equal(got, []string{"p/mine"}) {
				t.Errorf("models %v, want only the configured one", got)
			}
		})
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline, not synchronisation
	}
}

func chatOnce(t *testing.T, a *App, b *backend, id, wantModel string) {
	t.Helper()
	sv, err := a.Gateway.Start(context.Background(), id, llm.Interactive,
		&llm.Request{Model: id, Messages: []llm.Message{{Role: "user", Content: llm.Content{Text: "hi"}}}})
	if err != nil {
		t.Fatalf("%s: %v", id, err)
	}
	s := sv.Stream
	defer s.Close()
	ch, err := s.Next()
	if err != nil || !strings.Contains(string(ch.Raw), "hi from "+wantModel) {
		t.Fatalf("%s: chunk %s, %v", id, ch.Raw, err)
	}
	if got := <-b.chatted; got != wantModel {
		t.Fatalf("backend was asked for %q, want %q", got, wantModel)
	}
}

func modelState(st actors.AdminState, id string) (actors.ModelState, bool) {
	for _, p := range st.Providers {
		for _, m := range p.Models {
			if m.ID == id {
				return m, true
			}
		}
	}
	return actors.ModelState{}, false
}

func TestRefreshAddsAndNeverRemoves(t *testing.T) {
	b := newBackend(t, "a")
	a := start(t, b, "    refresh_models: 20ms\n    model_lanes: 1\n")
	if got := ids(a); !slices.Equal(got, []string{"p/a"}) {
		t.Fatalf("models at start %v", got)
	}

	b.setModels("a", "claude-sonnet-4-5")
	waitFor(t, "the refresh adds p/claude-sonnet-4-5", func() bool { _, ok := cards(a)["p/claude-sonnet-4-5"]; return ok })
	c := cards(a)["p/claude-sonnet-4-5"]
	if s := show(c.Spec); s != "200000/64000/true/true/true" || c.Spec.Provider != "p" || c.Spec.ModelLanes != 1 {
		t.Errorf("added card %s %+v", s, c.Spec)
	}
	if _, ok := modelState(a.Gateway.State(), "p/claude-sonnet-4-5"); !ok {
		t.Errorf("added model not in the state: %+v", a.Gateway.State())
	}
	chatOnce(t, a, b, "p/claude-sonnet-4-5", "claude-sonnet-4-5")

	// The backend stops listing "a": it keeps serving until restart.
	b.setModels("claude-sonnet-4-5")
	seen := b.lists.Load()
	waitFor(t, "two more refreshes", func() bool { return b.lists.Load() >= seen+2 })
	if got := ids(a); !slices.Equal(got, []string{"p/a", "p/claude-sonnet-4-5"}) {
		t.Fatalf("models after the backend dropped a: %v", got)
	}
	chatOnce(t, a, b, "p/a", "a")
}

// refresh_models 0 reads the list once, at start.
func TestNoRefreshWhenZero(t *testing.T) {
	b := newBackend(t, "a")
	a := start(t, b, "    refresh_models: 0s\n")
	if n := b.lists.Load(); n != 1 {
		t.Fatalf("%d list requests at start, want 1", n)
	}
	if a.refresh == nil {
		t.Fatal("no refresher")
	}
	// No goroutine was started: nothing can list again (goleak checks the others end).
	b.setModels("a", "b")
	chatOnce(t, a, b, "p/a", "a")
	if _, ok := cards(a)["p/b"]; ok || b.lists.Load() != 1 {
		t.Errorf("listed again with refresh_models 0: %d lists, cards %v", b.lists.Load(), ids(a))
	}
}

// Drain ends the refresh: afterwards the backend is never asked again.
func TestDrainStopsRefresh(t *testing.T) {
	b := newBackend(t, "a")
	yaml := fmt.Sprintf("providers:\n  - name: p\n    kind: openai\n    base_url: %s/v1\n    keys: [k]\n    refresh_models: 5ms\n", b.URL)
	cfg, err := config.Parse("test.yaml", []byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(context.Background(), cfg, Options{StateDir: t.TempDir(), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a refresh", func() bool { return b.lists.Load() >= 2 })
	if err := a.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	after := b.lists.Load()
	// Drain waited for the refresh goroutine: its last list request, if any, has returned.
	b.Close()
	if n := b.lists.Load(); n != after {
		t.Errorf("backend listed %d more times after Drain", n-after)
	}
}

// A provider with no configured model whose list fails at start serves nothing: it lists
// again with backoff until the backend answers, then serves what it lists, refresh_models 0
// or not.
func TestListRetriedAfterAFailedStart(t *testing.T) {
	b := newBackend(t, "late")
	b.mu.Lock()
	b.fail = true
	b.mu.Unlock()
	yaml := fmt.Sprintf("providers:\n  - name: p\n    kind: openai\n    base_url: %s/v1\n    keys: [k]\n    refresh_models: 0s\n", b.URL)
	cfg, err := config.Parse("test.yaml", []byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedLog
	a, err := New(context.Background(), cfg, Options{StateDir: t.TempDir(), Logger: zerolog.New(&logs), DiscoveryTimeout: time.Second, ListRetry: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Drain(context.Background())
	if got := ids(a); len(got) != 0 {
		t.Fatalf("models while the backend fails %v", got)
	}
	waitFor(t, "two more lists with backoff", func() bool { return b.lists.Load() >= 3 })
	// A retry's warning says the listing failed: the backend answered no list, not an empty one.
	waitFor(t, "a retry's warning", func() bool { return strings.Contains(logs.String(), "next_try_in") })
	if l := logs.String(); !strings.Contains(l, "listing the backend's models failed again") || strings.Contains(l, "lists no models") {
		t.Errorf("the retries' log says\n%s\nwant that the listing failed again", l)
	}
	b.mu.Lock()
	b.fail = false
	b.mu.Unlock()
	waitFor(t, "the backend's model served", func() bool { _, ok := cards(a)["p/late"]; return ok })
	chatOnce(t, a, b, "p/late", "late")
}

// lockedLog is a log the gateway's goroutines write and the test reads.
type lockedLog struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
