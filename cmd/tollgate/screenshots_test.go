package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tollgate/tollgate/providers/fake"
	"github.com/tollgate/tollgate/providers/llm"
)

// TestConsoleScreenshots writes the pictures of docs/ that README.md and docs/console.md show:
// the parallel chat in English and Korean, and the lanes dashboard, in the middle of a fan-out
// with every card state on screen; and the client keys and usage pages in both languages. It runs when TOLLGATE_SCREENSHOTS names the folder to write to
// (`make screenshots`), and fails if a picture could not be made.
func TestConsoleScreenshots(t *testing.T) {
	dir := os.Getenv("TOLLGATE_SCREENSHOTS")
	if dir == "" {
		t.Skip("TOLLGATE_SCREENSHOTS is not set; `make screenshots` sets it to docs/")
	}
	for _, shot := range []struct{ lang, parallel, lanes, keys, usage string }{
		{"en-US", "console-parallel.png", "console-lanes.png", "console-keys.png", "console-usage.png"},
		{"ko-KR", "console-parallel-ko.png", "", "console-keys-ko.png", "console-usage-ko.png"},
	} {
		t.Run(shot.lang, func(t *testing.T) {
			p := screenshotScene(t, shot.lang)
			save(t, p, filepath.Join(dir, shot.parallel))
			if shot.lanes != "" {
				p.do("open the lanes", chromedp.Navigate(p.base+"/ui/#lanes"))
				p.waitJS("the lanes show the busy local GPU",
					`document.querySelector('[data-provider="local"] .lanes-text')?.dataset.running === '1' &&
					 document.querySelector('[data-provider="local"] .queue')?.dataset.queued === '1'`)
				save(t, p, filepath.Join(dir, shot.lanes))
			}
			tenantsScreenshots(t, shot.lang, filepath.Join(dir, shot.keys), filepath.Join(dir, shot.usage))
		})
	}
}

// screenshotScene sends one prompt to six models and returns once the board shows a finished
// answer with folded reasoning, an echo, a truncated answer, a failure, a slow local model
// mid-stream and the other local model queued behind it (whichever reached the one lane first).
func screenshotScene(t *testing.T, lang string) *page {
	demo := heldFake("demo", nil, map[string]fake.Script{
		"thinker": {Reasoning: "The user wants a one-sentence introduction. Keep it short and friendly.",
			Reply: "I am Thinker, a demo model that reasons before it answers, relayed to you by Tollgate.", TokensPerSecond: 200},
		"long": {Reply: strings.Repeat("Tollgate keeps lanes, bounded queues and global caps, and answers busy fast and honestly. ", 8)},
	})
	local := heldFake("local", nil, map[string]fake.Script{
		"qwen2.5-7b": {Reply: "I am a seven-billion-parameter model on this machine's only GPU, so I answer one conversation " +
			"at a time while the gateway keeps the next one waiting in its queue instead of letting them collide.",
			TokensPerSecond: 3},
		"llama-3.2-3b": {Reply: "I am a small model sharing this machine's one GPU: whoever came second waits for the lane, " +
			"and the console shows for how long.", TokensPerSecond: 3},
	})
	cloud := heldFake("cloud", nil, map[string]fake.Script{"flaky": {Fail: fake.FailQuota}})
	gw := startGateway(t, `
providers:
  - name: demo
    kind: fake
    models: [{id: echo}, {id: thinker, reasoning: true, context_window: 32768}, {id: long}]
  - name: local
    kind: fake
    lanes: 1
    models: [{id: qwen2.5-7b, context_window: 32768}, {id: llama-3.2-3b}]
  - name: cloud
    kind: fake
    lanes: 8
    model_lanes: 4
    models: [{id: flaky}]
`, map[string]llm.Backend{"demo": demo, "local": local, "cloud": cloud})
	p := openConsole(t, gw.URL, lang, "parallel")
	p.do("size the window", chromedp.EmulateViewport(1360, 1180))
	p.pick("demo/thinker", "demo/echo", "demo/long", "cloud/flaky", "local/qwen2.5-7b", "local/llama-3.2-3b")
	p.click("#par-sample")
	p.fill("#par-max-tokens", "48")
	p.click("#par-send")
	p.waitJS("every state is on the board",
		countJS("done")+` === 2 && `+countJS("truncated")+` === 1 && `+countJS("failed")+` === 1 && `+
			countJS("queued")+` === 1 && `+countJS("generating")+` === 1 && `+
			`document.querySelector('.card[data-state="generating"] .card-answer').textContent.split(' ').length > 6 &&
			parseFloat(document.querySelector('.card[data-state="queued"] .state-time').textContent) >= 2.5`)
	return p
}

func save(t *testing.T, p *page, path string) {
	t.Helper()
	p.do("settle", chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
	img, err := chromedp.Run(p.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", path, err)
	}
	if err := os.WriteFile(path, img, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes) at %s", path, len(img), time.Now().Format(time.TimeOnly))
}
