package actors

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/providers/fake"
	"github.com/tollgate/tollgate/providers/llm"
)

func intp(v int) *int { return &v }

func cardIDs(g *Gateway) []string {
	var ids []string
	for _, c := range g.Models() {
		ids = append(ids, c.ID)
	}
	return ids
}

func findCard(t *testing.T, g *Gateway, id string) llm.ModelCard {
	t.Helper()
	for _, c := range g.Models() {
		if c.ID == id {
			return c
		}
	}
	t.Fatalf("no card %s in %v", id, cardIDs(g))
	return llm.ModelCard{}
}

func modelState(st AdminState, id string) (ModelState, bool) {
	for _, p := range st.Providers {
		for _, m := range p.Models {
			if m.ID == id {
				return m, true
			}
		}
	}
	return ModelState{}, false
}

// An added model routes, shows its card and state, and runs calls on its own lane.
func TestAddModelsServesAtOnce(t *testing.T) {
	ctx := context.Background()
	b := newHeld()
	p := testProvider("p", b, "a")
	p.Lanes = 2
	g := newTestGateway(t, 10, 16, p, testProvider("q", newHeld(), "z"))

	if _, err := g.Start(ctx, "p/b", llm.Interactive, &llm.Request{}); kindOf(t, err) != llm.KindModelNotFound {
		t.Fatalf("p/b before it was added: %v", err)
	}
	err := g.AddModels("p", []Model{{Name: "b", Lanes: 1, Aliases: []string{"bee"},
		Card: llm.Spec{ContextWindow: intp(32768)}}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cardIDs(g), []string{"p/a", "p/b", "q/z"}; !slices.Equal(got, want) {
		t.Fatalf("cards %v, want %v (sorted)", got, want)
	}
	c := findCard(t, g, "p/b")
	if c.Spec.Provider != "p" || c.Spec.Kind != "test" || c.Spec.Lanes != 2 || c.Spec.ModelLanes != 1 ||
		c.Spec.ContextWindow == nil || *c.Spec.ContextWindow != 32768 || c.Spec.Fallbacks == nil || c.Spec.RunTimeoutMs != 60000 {
		t.Errorf("card %+v", c.Spec)
	}

	// One call through the id, one through the alias: model_lanes 1 queues the second.
	first := startAsync(ctx, g, "p/b", llm.Interactive)
	hc := b.next(t)
	if hc.model != "b" {
		t.Fatalf("backend saw model %q, want b", hc.model)
	}
	second := startAsync(ctx, g, "bee", llm.Interactive)
	st := waitState(t, g, "p/b running 1, queued 1", func(s AdminState) bool {
		m, ok := modelState(s, "p/b")
		return ok && m.Running == 1 && m.Queued == 1
	})
	if m, _ := modelState(st, "p/b"); m.ModelLanes != 1 {
		t.Errorf("state of p/b: %+v", m)
	}
	close(hc.release)
	if text, err := drain(t, recv(t, first).stream); err != nil || text != "ok b" {
		t.Fatalf("first: %q %v", text, err)
	}
	hc = b.next(t)
	close(hc.release)
	if text, err := drain(t, recv(t, second).stream); err != nil || text != "ok b" {
		t.Fatalf("second: %q %v", text, err)
	}
	waitState(t, g, "idle", idle)
}

// Adding models while calls run and wait on every provider disturbs none of them.
func TestAddModelsKeepsAdmittedCalls(t *testing.T) {
	ctx := context.Background()
	bp, bq := newHeld(), newHeld()
	g := newTestGateway(t, 10, 16, testProvider("p", bp, "a"), testProvider("q", bq, "z"))
	runP, runQ := startAsync(ctx, g, "p/a", llm.Interactive), startAsync(ctx, g, "q/z", llm.Interactive)
	cp, cq := bp.next(t), bq.next(t)
	waitP, waitQ := startAsync(ctx, g, "p/a", llm.Normal), startAsync(ctx, g, "q/z", llm.Normal)
	waitState(t, g, "two queued", func(s AdminState) bool { return s.Queued == 2 })

	// p's new models sit before q's in the gate: q's admitted calls are re-indexed.
	if err := g.AddModels("p", []Model{{Name: "b", Lanes: 1}, {Name: "c", Lanes: 1}}); err != nil {
		t.Fatal(err)
	}
	st := g.State()
	for id, want := range map[string]ModelState{
		"p/a": {ID: "p/a", ModelLanes: 1, EffectiveModelLanes: 1, Running: 1, Queued: 1},
		"p/b": {ID: "p/b", ModelLanes: 1, EffectiveModelLanes: 1},
		"p/c": {ID: "p/c", ModelLanes: 1, EffectiveModelLanes: 1},
		"q/z": {ID: "q/z", ModelLanes: 1, EffectiveModelLanes: 1, Running: 1, Queued: 1},
	} {
		if got, _ := modelState(st, id); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v, want %+v", id, got, want)
		}
	}
	for _, w := range []struct {
		b       *heldBackend
		c       *heldCall
		running chan result
		queued  chan result
	}{{bp, cp, runP, waitP}, {bq, cq, runQ, waitQ}} {
		close(w.c.release)
		if _, err := drain(t, recv(t, w.running).stream); err != nil {
			t.Fatal(err)
		}
		next := w.b.next(t) // the queued call starts on its own model
		if next.model != w.c.model {
			t.Fatalf("queued call ran on %q, want %q", next.model, w.c.model)
		}
		close(next.release)
		if _, err := drain(t, recv(t, w.queued).stream); err != nil {
			t.Fatal(err)
		}
	}
	waitState(t, g, "idle", idle)
}

// The configuration wins: ids and aliases already served are skipped, never replaced.
func TestAddModelsSkipsWhatIsServed(t *testing.T) {
	p := testProvider("p", newHeld(), "a")
	p.Models[0].Aliases = []string{"short"}
	p.Models[0].Card = llm.Spec{ContextWindow: intp(1000)}
	g := newTestGateway(t, 10, 16, p)
	err := g.AddModels("p", []Model{
		{Name: "a", Lanes: 1, Card: llm.Spec{ContextWindow: intp(5)}},
		{Name: "b", Lanes: 1, Aliases: []string{"short", "bee"}},
		{Name: "b", Lanes: 1}, // twice in one list
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := cardIDs(g); !slices.Equal(got, []string{"p/a", "p/b"}) {
		t.Fatalf("cards %v", got)
	}
	if c := findCard(t, g, "p/a"); *c.Spec.ContextWindow != 1000 {
		t.Errorf("configured card replaced: %+v", c.Spec)
	}
	tbl := g.table.Load()
	if r := tbl.routes["short"]; r.model != "a" {
		t.Errorf("alias short leads to %q, want a", r.model)
	}
	if r := tbl.routes["bee"]; r.model != "b" {
		t.Errorf("alias bee leads to %q, want b", r.model)
	}
	if n := len(g.State().Providers[0].Models); n != 2 {
		t.Errorf("gate has %d models, want 2", n)
	}
	// Adding the same list again changes nothing.
	if err := g.AddModels("p", []Model{{Name: "b", Lanes: 1}}); err != nil || len(g.Models()) != 2 {
		t.Errorf("second add: %v, %d cards", err, len(g.Models()))
	}
}

func TestAddModelsErrors(t *testing.T) {
	g := newTestGateway(t, 10, 16, testProvider("p", newHeld(), "a"))
	for _, tt := range []struct {
		name, provider string
		models         []Model
		want           string
	}{
		{"unknown provider", "nope", []Model{{Name: "x", Lanes: 1}}, `no provider "nope"`},
		{"no name", "p", []Model{{Lanes: 1}}, "needs a name"},
		{"no lanes", "p", []Model{{Name: "x"}}, "model_lanes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := g.AddModels(tt.provider, tt.models)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want it to mention %q", err, tt.want)
			}
			if len(g.Models()) != 1 {
				t.Errorf("a failed add changed the cards: %v", cardIDs(g))
			}
		})
	}
	if err := g.AddModels("p", nil); err != nil {
		t.Errorf("adding nothing: %v", err)
	}
}

// After shutdown AddModels answers with an error instead of waiting forever.
func TestAddModelsAfterShutdown(t *testing.T) {
	g, err := New(Options{MaxRunning: 1, MaxAdmitted: 1, Logger: zerolog.Nop(),
		Providers: []Provider{testProvider("p", newHeld(), "a")}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := g.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.AddModels("p", []Model{{Name: "b", Lanes: 1}}); err == nil {
		t.Fatal("AddModels after shutdown succeeded")
	}
}

// Readers of the table (Start, Models) run alongside additions; -race checks the publishing.
func TestAddModelsConcurrentReaders(t *testing.T) {
	b := newHeld()
	g := newTestGateway(t, 10, 16, testProvider("p", b, "m0"))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // exits when stop is closed
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, c := range g.Models() {
				_ = c.Spec.Lanes
			}
			_, _ = g.Start(context.Background(), "p/none", llm.Interactive, &llm.Request{})
		}
	}()
	for i := 1; i <= 20; i++ {
		if err := g.AddModels("p", []Model{{Name: "m" + string(rune('a'+i)), Lanes: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if n := len(g.Models()); n != 21 {
		t.Fatalf("%d cards, want 21", n)
	}
	// The last one serves.
	res := startAsync(context.Background(), g, "p/mu", llm.Interactive)
	c := b.next(t)
	close(c.release)
	if text, err := drain(t, recv(t, res).stream); err != nil || text != "ok mu" {
		t.Fatalf("%q %v", text, err)
	}
}

// A lane actor of an added model is supervised like the others: after an injected fault it
// restarts and serves.
// With the scripted fake backend, the way the demo provider runs: a model added at
// runtime answers, and shows in Models and State.
func TestAddModelsWithFakeBackend(t *testing.T) {
	b := fake.New(fake.Config{Name: "demo", Default: fake.Script{Reply: "fresh answer"}})
	g := newTestGateway(t, 10, 16, testProvider("demo", b, "echo"))
	if err := g.AddModels("demo", []Model{{Name: "late", Lanes: 1}}); err != nil {
		t.Fatal(err)
	}
	sv, err := g.Start(context.Background(), "demo/late", llm.Interactive, &llm.Request{Model: "demo/late"})
	s := sv.Stream
	if err != nil {
		t.Fatal(err)
	}
	st := g.State()
	if m, ok := modelState(st, "demo/late"); !ok || m.Running != 1 {
		t.Errorf("state while it runs: %+v", st)
	}
	if text, err := drain(t, s); err != nil || text != "fresh answer" {
		t.Fatalf("got %q, %v", text, err)
	}
	if got := cardIDs(g); !slices.Equal(got, []string{"demo/echo", "demo/late"}) {
		t.Errorf("cards %v", got)
	}
	waitState(t, g, "idle", idle)
}
