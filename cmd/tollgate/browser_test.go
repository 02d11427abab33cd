package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/tollgate/tollgate/providers/llm"
)

// The console's tests drive a real headless Chromium (Debian's chromium package) over the
// DevTools protocol. Without Chromium they skip, unless CI is set: there its absence fails.

// chromium finds the browser: $TOLLGATE_CHROMIUM, else the usual names on PATH.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("TOLLGATE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless_shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no Chromium on PATH (chromium, chromium-browser, google-chrome) and CI is set: .ci/run installs Debian's chromium")
	}
	t.Skip("no Chromium on PATH; install Debian's chromium package to run the console tests")
	return ""
}

// page is one browser tab on the console, with a deadline for every step and a record of
// everything the page reported as wrong: uncaught exceptions, console errors and warnings,
// and the browser's own errors (a Content-Security-Policy violation among them). A test
// fails if the page reported any.
type page struct {
	t    *testing.T
	ctx  context.Context
	base string // the gateway's URL

	mu       sync.Mutex
	problems []string
}

// browserOptions are the flags the console tests run Chromium with: headless as root (no
// sandbox), a fresh profile, and none of the background connections this machine refuses.
func browserOptions(exe, profile, lang string) []chromedp.ExecAllocatorOption {
	return []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(profile),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("lang", lang),
		chromedp.Flag("accept-lang", lang),
		chromedp.WindowSize(1360, 900),
	}
}

// openConsole starts a browser whose language is lang ("en-US", "ko-KR") and opens the
// console of the gateway at base, at the view named by hash ("parallel", "lanes", …).
// The browser is closed when the test ends.
func openConsole(t *testing.T, base, lang, hash string) *page {
	t.Helper()
	exe := chromium(t)
	profile := t.TempDir() // removed after the browser has exited (cleanups run in reverse)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), browserOptions(exe, profile, lang)...)
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc() // waits for the browser process to exit
	})
	p := &page{t: t, ctx: ctx, base: base}
	if err := chromedp.Do(ctx); err != nil { // starts the browser, with no deadline of its own
		t.Fatalf("start chromium: %v", err)
	}
	if err := chromedp.Listen(ctx, p.observe); err != nil {
		t.Fatalf("listen to the page: %v", err)
	}
	t.Cleanup(p.check)
	p.do("open the console", chromedp.Navigate(base+"/ui/#"+hash))
	p.waitJS("the console has loaded its models", `document.querySelectorAll('#par-models li').length > 0 ||
		document.querySelector('#key-dialog').open || document.querySelector('#models-grid p') !== null`)
	return p
}

// observe records what the page reports as wrong. It runs in the tab's event loop: it only
// appends. Network errors are not recorded: the tests make the gateway refuse calls on
// purpose, and Chromium logs every refused fetch.
func (p *page) observe(ev any) {
	var problem string
	switch ev := ev.(type) {
	case *runtime.EventExceptionThrown:
		problem = "exception: " + ev.ExceptionDetails.Text
		if ev.ExceptionDetails.Exception != nil {
			problem += " " + ev.ExceptionDetails.Exception.Description
		}
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeWarning {
			var args []string
			for _, a := range ev.Args {
				args = append(args, strings.Trim(string(a.Value), `"`)+a.Description)
			}
			problem = fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(args, " "))
		}
	case *log.EventEntryAdded:
		if ev.Entry.Source != log.EntrySourceNetwork && ev.Entry.Level == log.EntryLevelError {
			problem = fmt.Sprintf("browser %s error: %s (%s)", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL)
		}
	}
	if problem != "" {
		p.mu.Lock()
		p.problems = append(p.problems, problem)
		p.mu.Unlock()
	}
}

func (p *page) check() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, problem := range p.problems {
		p.t.Errorf("the page reported: %s", problem)
	}
}

// stepTimeout bounds one browser step; waits for the gateway's own timers are shorter.
const stepTimeout = 15 * time.Second

// do runs browser actions, failing the test with what they were for.
func (p *page) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
}

// click clicks the element that a CSS selector finds.
func (p *page) click(css string) {
	p.t.Helper()
	p.do("click "+css, chromedp.Click(chromedp.CSS(css), chromedp.NodeVisible))
}

// clickJS clicks the element that a JavaScript expression returns.
func (p *page) clickJS(expr string) {
	p.t.Helper()
	p.do("click "+expr, chromedp.Click(chromedp.JSPath(expr), chromedp.NodeVisible))
}

// fill replaces the value of a form field.
func (p *page) fill(css, value string) {
	p.t.Helper()
	p.do("fill "+css, chromedp.SetValue(chromedp.CSS(css), value, chromedp.NodeVisible))
}

// waitJS polls a JavaScript expression until it is truthy (every animation frame), failing
// after stepTimeout with what was awaited and the page's cards, for the failure message. An
// expression that throws (an element not there yet) counts as false.
func (p *page) waitJS(what, expr string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, stepTimeout)
	defer cancel()
	guarded := "(() => { try { return (" + expr + "); } catch { return false; } })()"
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](guarded, chromedp.WithPollingTimeout(stepTimeout))); err != nil {
		p.t.Fatalf("waiting until %s: %v\nexpression: %s\ncards: %s", what, err, expr, p.cards())
	}
}

// cards describes the parallel and chat cards, for failure messages.
func (p *page) cards() string {
	ctx, cancel := context.WithTimeout(p.ctx, 2*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll('.card')].map((c) =>
		c.dataset.model + ' [' + c.dataset.state + '] ' + c.innerText.replace(/\s+/g, ' ')).join('\n')`))
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	return s
}

// eval evaluates a JavaScript expression in the page and decodes its value.
func eval[T any](p *page, expr string) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// text returns the text content of the first element a CSS selector finds ("" when none).
func (p *page) text(css string) string {
	p.t.Helper()
	return eval[string](p, fmt.Sprintf(`document.querySelector(%q)?.textContent ?? ''`, css))
}

// pick adds a model to the parallel chat's picks once per call.
func (p *page) pick(models ...string) {
	p.t.Helper()
	for _, m := range models {
		p.click(fmt.Sprintf(`#par-models li[data-model=%q] button[data-action="add"]`, m))
	}
}

// cardJS is a JavaScript expression for the n-th card (0-based) of a model.
func cardJS(model string, n int) string {
	return fmt.Sprintf(`[...document.querySelectorAll('.card[data-model=%q]')][%d]`, model, n)
}

// countJS is a JavaScript expression: how many cards are in state.
func countJS(state string) string {
	return fmt.Sprintf(`document.querySelectorAll('.card[data-state=%q]').length`, state)
}

// gate holds fake backend calls at their start (fake.Backend.Hold) until the test lets them
// go, and keeps each call's context so the test can see it cancelled.
type gate struct{ arrived chan *heldStart }

type heldStart struct {
	req     *llm.Request
	ctx     context.Context
	release chan struct{}
}

func newGate() *gate { return &gate{arrived: make(chan *heldStart, 64)} }

func (g *gate) hold(ctx context.Context, req *llm.Request) error {
	c := &heldStart{req: req, ctx: ctx, release: make(chan struct{})}
	g.arrived <- c
	select {
	case <-c.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// next returns the next call to reach the backend, failing after stepTimeout.
func (g *gate) next(t *testing.T) *heldStart {
	t.Helper()
	select {
	case c := <-g.arrived:
		return c
	case <-time.After(stepTimeout):
		t.Fatal("no call reached the backend")
		return nil
	}
}

// drain returns the calls that reached the backend and were not taken yet.
func (g *gate) drain() []*heldStart {
	var calls []*heldStart
	for {
		select {
		case c := <-g.arrived:
			calls = append(calls, c)
		default:
			return calls
		}
	}
}

func (c *heldStart) let() { close(c.release) }

// cancelled fails unless the call's context ends within stepTimeout.
func (c *heldStart) cancelled(t *testing.T) {
	t.Helper()
	select {
	case <-c.ctx.Done():
	case <-time.After(stepTimeout):
		t.Fatalf("the backend call of %s was never cancelled", c.req.Model)
	}
}
