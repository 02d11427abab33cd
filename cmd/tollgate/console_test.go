package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/providers/fake"
	"github.com/tollgate/tollgate/providers/llm"
)

// The console's parallel chat in a real browser against a real gateway (app wiring as the
// binary has it) whose backends are the scripted fake, held at their start where a test
// needs to decide when a call runs.

// heldFake is a fake backend for provider name; a non-nil gate holds every call it starts.
func heldFake(name string, g *gate, scripts map[string]fake.Script) *fake.Backend {
	b := fake.New(fake.Config{Name: name, Models: scripts, Default: fake.Script{Reply: "Hello from " + name + "."}})
	if g != nil {
		b.Hold = g.hold
	}
	return b
}

const trioConfig = `
providers:
  - name: trio
    kind: fake
    lanes: 3
    model_lanes: 1
    models: [{id: a}, {id: b}, {id: c}, {id: d}]
`

// trioScene is a gateway with one provider of three lanes whose calls are held, and the
// parallel chat open on it with its four models picked.
func trioScene(t *testing.T) (*gate, *fake.Backend, *gateway, *page) {
	g := newGate()
	trio := heldFake("trio", g, nil)
	gw := startGateway(t, trioConfig, map[string]llm.Backend{"trio": trio})
	p := openConsole(t, gw.URL, "en-US", "parallel")
	p.pick("trio/a", "trio/b", "trio/c", "trio/d")
	return g, trio, gw, p
}

// Four models of a provider with three lanes: the notice says one will wait; three cards
// generate while the fourth is queued; when a lane frees it runs, and its card says how long
// it waited, with a generation time that does not include the wait.
func TestConsoleParallelQueuesTheFourth(t *testing.T) {
	g, _, gw, p := trioScene(t)
	p.waitJS("the notice shows", `!document.querySelector('#par-notice').hidden`)
	if got, want := p.text("#par-notice-list"), "trio runs 3 at a time: 4 picked, so 1 will wait their turn."; got != want {
		t.Errorf("notice %q, want %q", got, want)
	}
	p.click("#par-sample")
	if got := eval[string](p, `document.querySelector('#par-prompt').value`); got != "Introduce yourself in one sentence." {
		t.Errorf("sample prompt %q", got)
	}
	p.click("#par-send")

	var running []*heldStart
	for range 3 {
		c := g.next(t)
		running = append(running, c)
		if c.req.OutputLimit() != 16384 || !c.req.Stream || !c.req.WantsUsage() {
			t.Errorf("request of %s: max_tokens %d, stream %v, include_usage %v; want 16384, true, true",
				c.req.Model, c.req.OutputLimit(), c.req.Stream, c.req.WantsUsage())
		}
		if got := c.req.Messages[0].Content.PlainText(); got != "Introduce yourself in one sentence." {
			t.Errorf("prompt %q", got)
		}
	}
	p.waitJS("three cards generate and one is queued", countJS("generating")+` === 3 && `+countJS("queued")+` === 1`)
	gw.waitQueued(t, 1)
	queuedBy := time.Now() // the gateway queued it by now
	// The queued card counts its wait live; let it pass 1.2 s by its own clock, and the
	// gateway's at least 1.1 s (the browser's clock starts when it sends, which on a loaded
	// machine is well before the gateway queues the call).
	p.waitJS("the queued card has waited 1.2 s", `parseFloat(document.querySelector('.card[data-state="queued"] .state-time').textContent) >= 1.2`)
	<-time.After(time.Until(queuedBy.Add(1100 * time.Millisecond))) // the wait under test, not a synchronization
	queued := eval[string](p, `document.querySelector('.card[data-state="queued"]').dataset.model`)

	running[0].let()
	fourth := g.next(t)
	if "trio/"+fourth.req.Model != queued {
		t.Fatalf("the call that started is %s, the queued card %s", fourth.req.Model, queued)
	}
	fourth.let()
	sel := cardJS(queued, 0)
	p.waitJS("the fourth card is done", sel+`.dataset.state === 'done'`)
	wait := eval[string](p, sel+`.querySelector('.card-wait').textContent`)
	if !strings.HasPrefix(wait, "started after 1.") || !strings.HasSuffix(wait, " s in the queue") {
		t.Errorf("wait line %q, want \"started after 1.x s in the queue\"", wait)
	}
	queueMs, _ := strconv.Atoi(eval[string](p, sel+`.dataset.queueMs`))
	if queueMs <= 1000 {
		t.Errorf("X-Gateway-Queue-Ms %d, want > 1000 (the card waited 1.2 s by its own clock)", queueMs)
	}
	foot := eval[string](p, sel+`.querySelector('.card-foot').textContent`)
	if secs, err := strconv.ParseFloat(strings.Fields(foot)[0], 64); err != nil || secs >= 1 {
		t.Errorf("footer %q: the time must count from the start of generation (< 1 s here), not from the queue", foot)
	}
	if !strings.Contains(foot, "finish: stop") || !strings.Contains(foot, "out tokens") {
		t.Errorf("footer %q, want the finish reason and the tokens", foot)
	}

	for _, c := range running[1:] {
		c.let()
	}
	p.waitJS("every card is done", countJS("done")+` === 4`)
	for _, m := range []string{"trio/a", "trio/b", "trio/c", "trio/d"} {
		if m == queued {
			continue
		}
		if !eval[bool](p, cardJS(m, 0)+`.querySelector('.card-wait').hidden`) {
			t.Errorf("%s started at once, yet shows a queue-wait line", m)
		}
	}
	gw.waitIdle(t)
}

// One Stop stops every card: the running calls' backend contexts are cancelled and the queued
// one leaves the gateway's queue (or, had it started on the way out, is cancelled as well).
func TestConsoleStopAllCancelsEveryCall(t *testing.T) {
	g, trio, gw, p := trioScene(t)
	p.fill("#par-prompt", "Count to three.")
	p.click("#par-send")
	var calls []*heldStart
	for range 3 {
		calls = append(calls, g.next(t))
	}
	p.waitJS("three generate, one is queued", countJS("generating")+` === 3 && `+countJS("queued")+` === 1`)
	gw.waitQueued(t, 1)

	p.click("#par-stop")
	for _, c := range calls {
		c.cancelled(t)
	}
	p.waitJS("every card is stopped", countJS("stopped")+` === 4`)
	// The console aborts the queued call first, but should the gateway see lanes free before it
	// sees that client leave, the call starts; it must then be cancelled too, which happens
	// when Chromium lets go of the connection (it may keep one up to 5 s to drain an answer
	// that began as it aborted).
	gw.waitIdleWithin(t, stepTimeout)
	for _, c := range g.drain() {
		c.cancelled(t)
		t.Logf("the queued call of %s started as the console left, and was cancelled", c.req.Model)
	}
	if trio.Active() != 0 {
		t.Errorf("%d backend calls still open after Stop all", trio.Active())
	}
	if !eval[bool](p, `document.querySelector('#par-stop').disabled`) {
		t.Error("Stop all is still enabled with nothing running")
	}
	// Each card can be sent again on its own.
	p.clickJS(cardJS("trio/a", 0) + `.querySelector('button.retry')`)
	g.next(t).let()
	p.waitJS("the retried card is done", cardJS("trio/a", 0)+`.dataset.state === 'done'`)
}

// Sending again replaces the board: the old cards' calls are cancelled, the new ones run.
func TestConsoleSendAgainStopsTheOldCards(t *testing.T) {
	g, trio, gw, p := trioScene(t)
	p.fill("#par-prompt", "first")
	p.click("#par-send")
	old := []*heldStart{g.next(t), g.next(t), g.next(t)}
	p.waitJS("three generate, one is queued", countJS("generating")+` === 3 && `+countJS("queued")+` === 1`)

	p.fill("#par-prompt", "second")
	p.click("#par-send")
	for _, c := range old {
		c.cancelled(t)
	}
	var fresh []*heldStart
	for len(fresh) < 4 {
		c := g.next(t)
		if got := c.req.Messages[0].Content.PlainText(); got == "first" {
			c.cancelled(t) // the old queued call, had it started on the way out
			continue
		}
		fresh = append(fresh, c)
		c.let()
	}
	p.waitJS("the new board is done", `document.querySelectorAll('#par-cards .card').length === 4 && `+countJS("done")+` === 4`)
	gw.waitIdle(t)
	if trio.Active() != 0 {
		t.Errorf("%d backend calls still open", trio.Active())
	}
}

// A model that fails shows its code and message; the other cards run on, and one card's own
// Stop stops that card alone.
func TestConsoleOneFailureLeavesTheOthers(t *testing.T) {
	g := newGate()
	mix := heldFake("mix", g, map[string]fake.Script{"bad": {Fail: fake.FailInvalid}})
	gw := startGateway(t, `
providers:
  - name: mix
    kind: fake
    lanes: 4
    model_lanes: 2
    models: [{id: ok1}, {id: ok2}, {id: bad}]
`, map[string]llm.Backend{"mix": mix})
	p := openConsole(t, gw.URL, "en-US", "parallel")

	p.pick("mix/ok1", "mix/bad", "mix/ok2")
	if !eval[bool](p, `document.querySelector('#par-notice').hidden`) {
		t.Error("the notice shows although every pick fits its lanes")
	}
	p.fill("#par-prompt", "hi")
	p.click("#par-send")
	a, b := g.next(t), g.next(t)
	bad := cardJS("mix/bad", 0)
	p.waitJS("the failing card shows its code", bad+`.dataset.state === 'failed'`)
	if got := eval[string](p, bad+`.querySelector('.card-error').textContent`); got != "upstream_invalid_request fake: invalid request" {
		t.Errorf("error line %q", got)
	}
	if got := eval[string](p, bad+`.dataset.retries`); got != "0" {
		t.Errorf("a failure that waiting cannot fix was retried %s times", got)
	}
	if n := eval[int](p, countJS("generating")); n != 2 {
		t.Errorf("%d cards generate after one failed, want 2", n)
	}
	// One card's own Stop cancels only its call; the other finishes.
	p.clickJS(cardJS("mix/"+b.req.Model, 0) + `.querySelector('button.stop')`)
	b.cancelled(t)
	a.let()
	p.waitJS("the other finishes", countJS("done")+` === 1 && `+countJS("stopped")+` === 1 && `+countJS("failed")+` === 1`)
	if got := eval[string](p, cardJS("mix/"+a.req.Model, 0)+`.dataset.state`); got != "done" {
		t.Errorf("the card left running is %s, want done", got)
	}
	gw.waitIdle(t)
}

// A card refused with provider_queue_full waits, retries by itself and then succeeds.
func TestConsoleRetriesAQueueFullCard(t *testing.T) {
	g := newGate()
	solo := heldFake("solo", g, nil)
	gw := startGateway(t, `
providers:
  - name: solo
    kind: fake
    lanes: 1
    queue_length: 0
    models: [{id: a}, {id: b}]
`, map[string]llm.Backend{"solo": solo})
	p := openConsole(t, gw.URL, "en-US", "parallel")

	p.pick("solo/a", "solo/b")
	p.fill("#par-prompt", "hi")
	p.click("#par-send")
	first := g.next(t)
	other := "solo/b"
	if first.req.Model == "b" {
		other = "solo/a"
	}
	sel := cardJS(other, 0)
	p.waitJS("the refused card is busy, retrying", sel+`.dataset.state === 'busy'`)
	if got := eval[string](p, sel+`.querySelector('.error-code').textContent`); got != "provider_queue_full" {
		t.Errorf("busy card shows code %q, want provider_queue_full", got)
	}
	if got := eval[string](p, sel+`.querySelector('.state-time').textContent`); !strings.HasPrefix(got, "retry 1 of 2 in ") {
		t.Errorf("busy card says %q, want \"retry 1 of 2 in …\"", got)
	}
	first.let()
	second := g.next(t) // the retry, once the lane is free
	if "solo/"+second.req.Model != other {
		t.Fatalf("the retried call is %s, want %s", second.req.Model, other)
	}
	second.let()
	p.waitJS("the retried card is done", sel+`.dataset.state === 'done'`)
	if foot := eval[string](p, sel+`.querySelector('.card-foot').textContent`); !strings.Contains(foot, "after 1 retry") {
		t.Errorf("footer %q, want \"after 1 retry\"", foot)
	}
	if solo.Calls() != 2 {
		t.Errorf("backend calls %d, want 2 (the refused attempt never reached it)", solo.Calls())
	}
	gw.waitIdle(t)
}

// A finish_reason of "length" marks the card truncated, with a warning naming max_tokens.
// The same model picked twice gets two cards.
func TestConsoleTruncatedAnswer(t *testing.T) {
	plain := heldFake("plain", nil, map[string]fake.Script{"long": {Reply: "one two three four five six"}})
	logs := &syncBuffer{}
	gw := serveGateway(t, `
providers:
  - name: plain
    kind: fake
    models: [{id: long}]
`, map[string]llm.Backend{"plain": plain}, zerolog.New(logs))
	p := openConsole(t, gw.URL, "en-US", "parallel")

	p.pick("plain/long", "plain/long")
	p.fill("#par-prompt", "count")
	p.fill("#par-max-tokens", "3")
	p.click("#par-send")
	p.waitJS("both cards are truncated", countJS("truncated")+` === 2`)
	for n := range 2 {
		sel := cardJS("plain/long", n)
		if got := eval[string](p, sel+`.querySelector('.card-title').textContent`); got != fmt.Sprintf("plain/long · #%d", n+1) {
			t.Errorf("title %q", got)
		}
		if got := eval[string](p, sel+`.querySelector('.state-label').textContent`); got != "done · truncated" {
			t.Errorf("state %q, want \"done · truncated\"", got)
		}
		if got := eval[string](p, sel+`.querySelector('.card-warning').textContent`); !strings.Contains(got, "max_tokens (3)") {
			t.Errorf("warning %q, want it to name max_tokens (3)", got)
		}
		if got := eval[string](p, sel+`.querySelector('.card-answer').textContent`); got != "one two three" {
			t.Errorf("answer %q", got)
		}
		if got := eval[string](p, sel+`.querySelector('.card-foot').textContent`); !strings.Contains(got, "finish: length") {
			t.Errorf("footer %q, want finish: length", got)
		}
	}
	if got := chatPriorities(logs); got != "interactive interactive" {
		t.Errorf("the cards' requests ran at priorities %q, want interactive for both", got)
	}
}

// chatPriorities lists the priority of every chat request in the gateway's log, in order.
func chatPriorities(logs *syncBuffer) string {
	var prios []string
	for _, l := range strings.Split(logs.String(), "\n") {
		var line struct{ Message, Priority string }
		if json.Unmarshal([]byte(l), &line) == nil && line.Message == "chat" {
			prios = append(prios, line.Priority)
		}
	}
	return strings.Join(prios, " ")
}
