package main

import (
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/providers/fake"
	"github.com/tollgate/tollgate/providers/llm"
)

// The console's other views, its languages, its keys and its handling of model output, in a
// real browser against a real gateway.

// Single chat: the reasoning arrives folded, the next message carries the conversation (the
// answer without its reasoning), and Stop cancels the backend call.
func TestConsoleSingleChat(t *testing.T) {
	g := newGate()
	mind := heldFake("mind", g, map[string]fake.Script{"thinker": {Reasoning: "Let me think.", Reply: "Forty-two."}})
	logs := &syncBuffer{}
	gw := serveGateway(t, "providers: [{name: mind, kind: fake, models: [{id: other}, {id: thinker}]}]",
		map[string]llm.Backend{"mind": mind}, zerolog.New(logs))
	p := openConsole(t, gw.URL, "en-US", "chat")

	p.do("pick the model", chromedp.SetValue(chromedp.CSS("#chat-model"), "mind/thinker"))
	p.fill("#chat-input", "What is the answer?")
	p.click("#chat-send")
	first := g.next(t)
	if n := len(first.req.Messages); n != 1 {
		t.Fatalf("first message sends %d messages, want 1", n)
	}
	first.let()
	answer := cardJS("mind/thinker", 0)
	p.waitJS("the answer is done", answer+`.dataset.state === 'done'`)
	if got := eval[string](p, answer+`.querySelector('.card-answer').textContent`); got != "Forty-two." {
		t.Errorf("answer %q", got)
	}
	folded := eval[[]any](p, `[`+answer+`.querySelector('details.card-reasoning').hidden, `+answer+`.querySelector('details').open, `+
		answer+`.querySelector('.reasoning-text').textContent]`)
	if folded[0] != false || folded[1] != false || folded[2] != "Let me think." {
		t.Errorf("reasoning hidden %v, open %v, text %q; want shown, folded, \"Let me think.\"", folded[0], folded[1], folded[2])
	}

	p.do("type and press Enter", chromedp.SendKeys(chromedp.CSS("#chat-input"), "And why?\n"))
	second := g.next(t)
	var roles []string
	for _, m := range second.req.Messages {
		roles = append(roles, m.Role+": "+m.Content.PlainText())
	}
	if got, want := strings.Join(roles, " | "), "user: What is the answer? | assistant: Forty-two. | user: And why?"; got != want {
		t.Errorf("second request sends %q, want %q", got, want)
	}
	p.waitJS("the second answer generates", cardJS("mind/thinker", 1)+`.dataset.state === 'generating'`)
	p.click("#chat-stop")
	second.cancelled(t)
	p.waitJS("the second answer is stopped", cardJS("mind/thinker", 1)+`.dataset.state === 'stopped'`)
	gw.waitIdle(t)
	if got := chatPriorities(logs); got != "interactive interactive" {
		t.Errorf("the chat's requests ran at priorities %q, want interactive", got)
	}
}

// A browser that prefers Korean gets the console in Korean, a model's Korean answer shows as
// sent, and switching to English redraws everything, remembered across a reload.
func TestConsoleKorean(t *testing.T) {
	plain := heldFake("plain", nil, map[string]fake.Script{"hello": {Reply: "안녕하세요, 저는 데모 모델입니다."}})
	gw := startGateway(t, "providers: [{name: plain, kind: fake, models: [{id: hello}]}]", map[string]llm.Backend{"plain": plain})
	p := openConsole(t, gw.URL, "ko-KR", "parallel")

	if got := eval[string](p, `document.documentElement.lang`); got != "ko" {
		t.Errorf("html lang %q, want ko", got)
	}
	for sel, want := range map[string]string{
		`nav a[data-view="parallel"]`: "병렬 채팅",
		"#par-sample":                 "예시 프롬프트",
		"#par-stop":                   "모두 중지",
	} {
		if got := p.text(sel); got != want {
			t.Errorf("%s reads %q, want %q", sel, got, want)
		}
	}
	p.pick("plain/hello", "plain/hello")
	p.click("#par-sample")
	if got := eval[string](p, `document.querySelector('#par-prompt').value`); got != "한 문장으로 자기소개를 해 주세요." {
		t.Errorf("Korean sample prompt %q", got)
	}
	p.click("#par-send")
	p.waitJS("both cards are done", countJS("done")+` === 2`)
	card := cardJS("plain/hello", 0)
	for what, want := range map[string]string{".state-label": "완료", ".card-answer": "안녕하세요, 저는 데모 모델입니다."} {
		if got := eval[string](p, card+`.querySelector('`+what+`').textContent`); got != want {
			t.Errorf("card %s reads %q, want %q", what, got, want)
		}
	}
	if foot := eval[string](p, card+`.querySelector('.card-foot').textContent`); !strings.Contains(foot, "종료 사유: stop") || !strings.Contains(foot, "초") {
		t.Errorf("footer %q is not in Korean", foot)
	}

	p.do("switch to English", chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector('#lang');
		s.value = 'en'; s.dispatchEvent(new Event('change')); })()`))
	if got := p.text(`nav a[data-view="parallel"]`); got != "Parallel chat" {
		t.Errorf("after switching, the nav reads %q", got)
	}
	if got := eval[string](p, card+`.querySelector('.state-label').textContent`); got != "done" {
		t.Errorf("after switching, the card reads %q", got)
	}
	p.do("reload", chromedp.Reload())
	p.waitJS("the console is back", `document.querySelectorAll('#par-models li').length > 0`)
	if got := eval[string](p, `document.documentElement.lang + ' ' + document.querySelector('nav a[data-view="parallel"]').textContent`); got != "en Parallel chat" {
		t.Errorf("after a reload the console is %q, want the English it was switched to", got)
	}
}

// Model output is text: markup in an answer or its reasoning is shown, never run or rendered.
func TestConsoleRendersMarkupAsText(t *testing.T) {
	const reply = `<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2"><b>bold</b> & done`
	const reasoning = `<i onmouseover="window.__pwned = 3">thinking</i>`
	plain := heldFake("plain", nil, map[string]fake.Script{"html": {Reply: reply, Reasoning: reasoning}})
	gw := startGateway(t, "providers: [{name: plain, kind: fake, models: [{id: html}]}]", map[string]llm.Backend{"plain": plain})
	p := openConsole(t, gw.URL, "en-US", "chat")

	p.fill("#chat-input", "show me some HTML")
	p.click("#chat-send")
	card := cardJS("plain/html", 0)
	p.waitJS("the answer is done", card+`.dataset.state === 'done'`)
	got := eval[[]any](p, `[`+card+`.querySelector('.card-answer').textContent, `+card+`.querySelector('.reasoning-text').textContent,
		document.querySelectorAll('#chat-log script, #chat-log img, #chat-log b, #chat-log i').length, typeof window.__pwned]`)
	if got[0] != reply || got[1] != reasoning {
		t.Errorf("answer %q, reasoning %q; want them as the model sent them", got[0], got[1])
	}
	if got[2] != float64(0) || got[3] != "undefined" {
		t.Errorf("%v elements were made from the model's markup, window.__pwned is %v", got[2], got[3])
	}
}

// With api_keys and admin_keys configured the console asks for a key, says when one is
// refused, keeps it for the session only, and asks for the admin key for the lanes.
func TestConsoleAsksForKeys(t *testing.T) {
	plain := heldFake("plain", nil, nil)
	gw := startGateway(t, `
auth: {api_keys: [sk-user-1234], admin_keys: [sk-admin-5678]}
providers: [{name: plain, kind: fake, models: [{id: echo}]}]
`, map[string]llm.Backend{"plain": plain})
	p := openConsole(t, gw.URL, "en-US", "chat")

	p.waitJS("the key dialog is open", `document.querySelector('#key-dialog').open`)
	if got := p.text("#key-title"); got != "API key" {
		t.Errorf("dialog title %q", got)
	}
	p.fill("#key-input", "wrong")
	p.click("#key-save")
	p.waitJS("the refusal is shown", `document.querySelector('#key-dialog').open && !document.querySelector('#key-refused').hidden`)
	if got := p.text("#key-refused"); !strings.Contains(got, "refused") || !strings.Contains(got, "invalid_api_key") {
		t.Errorf("refusal reads %q", got)
	}
	p.fill("#key-input", "sk-user-1234")
	p.click("#key-save")
	p.waitJS("the models load", `!document.querySelector('#key-dialog').open && document.querySelectorAll('#chat-model option').length === 1`)
	stored := eval[[]any](p, `[sessionStorage.getItem('tollgate.api_key'), Object.values(localStorage).join(' ')]`)
	if stored[0] != "sk-user-1234" || strings.Contains(stored[1].(string), "sk-") {
		t.Errorf("session key %v, local storage %q: the key belongs in sessionStorage only", stored[0], stored[1])
	}

	p.fill("#chat-input", "hi")
	p.click("#chat-send")
	p.waitJS("the chat answers with the key", cardJS("plain/echo", 0)+`.dataset.state === 'done'`)

	p.do("open the lanes", chromedp.Evaluate[chromedp.Void](`location.hash = 'lanes'`))
	p.waitJS("the admin key is asked for", `document.querySelector('#key-dialog').open && document.querySelector('#key-title').textContent === 'Admin key'`)
	p.fill("#key-input", "sk-admin-5678")
	p.click("#key-save")
	p.waitJS("the lanes show", `document.querySelector('#lanes-summary').textContent.startsWith('0 of 10 running')`)
	if got := eval[string](p, `sessionStorage.getItem('tollgate.admin_key')`); got != "sk-admin-5678" {
		t.Errorf("admin key %q in the session", got)
	}
}

// The lanes dashboard follows /admin/state live: running and queued calls appear and go.
func TestConsoleLanesAreLive(t *testing.T) {
	g := newGate()
	trio := heldFake("trio", g, nil)
	gw := startGateway(t, trioConfig, map[string]llm.Backend{"trio": trio})
	p := openConsole(t, gw.URL, "en-US", "lanes")
	p.waitJS("the idle gateway shows", `document.querySelector('#lanes-summary').textContent === '0 of 10 running · 0 queued · 0 of 16 admitted'`)

	var wg sync.WaitGroup
	for _, m := range []string{"a", "b", "c", "d"} {
		wg.Go(func() { // ends when the call's stream does: released below, or cancelled at cleanup
			res, err := rawClient.Post(gw.URL+"/v1/chat/completions", "application/json",
				strings.NewReader(`{"model":"trio/`+m+`","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		})
	}
	calls := []*heldStart{g.next(t), g.next(t), g.next(t)}
	p.waitJS("three run and one waits", `(() => { const p = document.querySelector('[data-provider="trio"]');
		return p.querySelector('.lanes-text').dataset.running === '3' && p.querySelector('.queue').dataset.queued === '1' &&
			p.querySelectorAll('.lane.busy').length === 3 && p.querySelectorAll('tbody td.hot').length === 4; })()`)
	if got := p.text("#lanes-summary"); got != "3 of 10 running · 1 queued · 4 of 16 admitted" {
		t.Errorf("summary %q", got)
	}
	for _, c := range calls {
		c.let()
	}
	g.next(t).let()
	p.waitJS("everything is done", `document.querySelector('#lanes-summary').textContent === '0 of 10 running · 0 queued · 0 of 16 admitted'`)
	wg.Wait()
}

// The model cards show the spec, unknown values as unknown, and "test model" sends one short
// call at priority normal.
func TestConsoleModelCards(t *testing.T) {
	logs := &syncBuffer{}
	plain := heldFake("plain", nil, map[string]fake.Script{"echo": {Reply: "Hi, I am echo."}})
	gw := serveGateway(t, `
providers:
  - name: plain
    kind: fake
    lanes: 3
    run_timeout: 2m
    models: [{id: echo, context_window: 8192, tools: false}]
`, map[string]llm.Backend{"plain": plain}, zerolog.New(logs))
	p := openConsole(t, gw.URL, "en-US", "models")

	spec := `[...document.querySelectorAll('.spec-card[data-model="plain/echo"] dd')].map((d) => d.textContent).join(' | ')`
	if got, want := eval[string](p, spec), "plain | fake | 8,192 | unknown | unknown | no | unknown | 3 | 2 | 2 min | interactive | none"; got != want {
		t.Errorf("spec card reads %q, want %q", got, want)
	}
	p.click(`.spec-card[data-model="plain/echo"] button`)
	result := `.spec-card[data-model="plain/echo"] .test-result`
	p.waitJS("the test answers", `document.querySelector('`+result+`').dataset.state === 'ok'`)
	if got := p.text(result); !strings.HasPrefix(got, "answered in ") || !strings.HasSuffix(got, "Hi, I am echo.") {
		t.Errorf("test result %q", got)
	}
	if got := chatPriorities(logs); got != "normal" {
		t.Errorf("the test call ran at priority %q, want normal", got)
	}
}

// A card's scroll follows new text while the reader is at its end, and stays put once they
// scroll up.
func TestConsoleCardScrollFollowsOnlyNearTheEnd(t *testing.T) {
	// The answer outlasts the deadlines of the five steps that follow the send, so it cannot
	// end before the test has seen the scroll unless a step has failed already (at 6.4 s it
	// left those steps a margin a loaded machine could use up). The stop ends it.
	const phrase, perSecond = "Lanes, queues and caps keep every backend within what it can take. ", 150
	repeats := int(5*stepTimeout.Seconds()*perSecond)/len(fake.Tokenize(phrase)) + 1
	plain := heldFake("plain", nil, map[string]fake.Script{
		"long": {Reply: strings.Repeat(phrase, repeats), TokensPerSecond: perSecond},
	})
	gw := startGateway(t, "providers: [{name: plain, kind: fake, models: [{id: long}]}]", map[string]llm.Backend{"plain": plain})
	p := openConsole(t, gw.URL, "en-US", "parallel")
	p.pick("plain/long", "plain/long")
	p.fill("#par-prompt", "talk")
	p.click("#par-send")

	body := cardJS("plain/long", 0) + `.querySelector('.card-body')`
	atEnd := `(` + body + `.scrollHeight - ` + body + `.scrollTop - ` + body + `.clientHeight <= 2)`
	p.waitJS("the card overflows and follows", body+`.scrollHeight > 2 * `+body+`.clientHeight && `+atEnd)
	p.do("scroll up", chromedp.Evaluate[chromedp.Void](body+`.scrollTop = 0; window.__h = `+body+`.scrollHeight`))
	p.waitJS("more text arrives", body+`.scrollHeight > window.__h + 100`)
	if top := eval[float64](p, body+`.scrollTop`); top != 0 {
		t.Errorf("the card scrolled to %v while the reader was at the top", top)
	}
	p.do("scroll back down", chromedp.Evaluate[chromedp.Void](body+`.scrollTop = `+body+`.scrollHeight; window.__h = `+body+`.scrollHeight`))
	p.waitJS("more text arrives and the card follows again", body+`.scrollHeight > window.__h + 100 && `+atEnd)
	if eval[string](p, cardJS("plain/long", 0)+`.dataset.state`) != "generating" {
		t.Fatal("the answer ended before the test could see the scroll: make it longer")
	}
	p.click("#par-stop")
	p.waitJS("stopped", countJS("stopped")+` === 2`)
}

// The console's pure rules, run in the browser as the console runs them: the SSE parser on
// every split of a stream, the retry waits, the lanes notice, a provider whose learned lanes
// are below its configured ones (the gateway cannot be made to learn that here yet), and the
// dictionaries' keys.
func TestConsoleRules(t *testing.T) {
	plain := heldFake("plain", nil, nil)
	gw := startGateway(t, "providers: [{name: plain, kind: fake, models: [{id: echo}]}]", map[string]llm.Backend{"plain": plain})
	p := openConsole(t, gw.URL, "en-US", "chat")

	sse := eval[[]string](p, `(async () => {
		const { Parser } = await import('/ui/js/sse.js');
		const stream = ': comment\r\ndata: {"a":1}\r\n\r\ndata:b\ndata:  c\n\nevent: x\ndata\n\ndata: [DONE]\r\rdata: cut';
		const runs = [];
		for (let cut = 0; cut <= stream.length; cut++) {
			const out = [];
			const p = new Parser((d) => out.push(d));
			p.push(stream.slice(0, cut));
			p.push(stream.slice(cut));
			p.end();
			runs.push(JSON.stringify(out));
		}
		return [...new Set(runs)];
	})()`)
	if want := `["{\"a\":1}","b\n c","","[DONE]"]`; len(sse) != 1 || sse[0] != want {
		t.Errorf("SSE parser results over every split: %q, want only %q", sse, want)
	}

	retry := eval[[]float64](p, `(async () => {
		const { retryDelay, shouldRetry } = await import('/ui/js/retry.js');
		return [retryDelay(1, 0, () => 0), retryDelay(1, 0, () => 0.999), retryDelay(2, 0, () => 0), retryDelay(2, 0, () => 0.999),
			retryDelay(1, 2000, () => 0), retryDelay(2, 5000, () => 0.5),
			+shouldRetry('provider_queue_full', 0), +shouldRetry('gateway_overloaded', 1), +shouldRetry('gateway_overloaded', 2),
			+shouldRetry('provider_queue_timeout', 0), +shouldRetry('upstream_rate_limited', 0)];
	})()`)
	want := []float64{1500, 1799.7, 3000, 3599.4, 2000, 5500, 1, 1, 0, 0, 0}
	for i := range want {
		if i >= len(retry) || retry[i] < want[i]-0.01 || retry[i] > want[i]+0.01 {
			t.Fatalf("retry rules %v, want %v", retry, want)
		}
	}

	notice := eval[string](p, `(async () => {
		const { overflow } = await import('/ui/js/capacity.js');
		const specs = { 'c/a': { provider: 'c', lanes: 3, model_lanes: 1 }, 'c/b': { provider: 'c', lanes: 3, model_lanes: 1 },
			'd/x': { provider: 'd', lanes: 4, model_lanes: 2 } };
		const of = (id) => specs[id];
		return JSON.stringify([overflow(['c/a', 'c/b', 'd/x', 'd/x'], of), overflow(['c/a', 'c/a', 'c/b', 'c/b'], of),
			overflow(['d/x', 'd/x', 'd/x', 'unknown/m'], of)]);
	})()`)
	if want := `[[],[{"scope":"provider","name":"c","picked":4,"lanes":3,"extra":1},` +
		`{"scope":"model","name":"c/a","picked":2,"lanes":1,"extra":1},{"scope":"model","name":"c/b","picked":2,"lanes":1,"extra":1}],` +
		`[{"scope":"model","name":"d/x","picked":3,"lanes":2,"extra":1}]]`; notice != want {
		t.Errorf("notice rules:\n got %s\nwant %s", notice, want)
	}

	lanes := eval[string](p, `(async () => {
		const { providerView } = await import('/ui/js/lanes.js');
		const el = providerView({ name: 'deep', kind: 'deepseek', lanes: 4, effective_lanes: 2, running: 1, queued: 3, queue_length: 8,
			models: [{ id: 'deep/chat', model_lanes: 2, running: 1, queued: 3 }] });
		return [...el.querySelectorAll('.lane')].map((l) => l.className).join(',') + ' | ' +
			el.querySelector('.learned').textContent + ' | ' + el.querySelector('.queue').textContent;
	})()`)
	if want := "lane busy,lane free,lane off,lane off | learned: 2 of 4 lanes usable | queue 3 of 8"; lanes != want {
		t.Errorf("a provider with learned lanes draws as %q, want %q", lanes, want)
	}

	same := eval[bool](p, `(async () => {
		const { dictionaries } = await import('/ui/js/i18n.js');
		const keys = Object.values(dictionaries).map((d) => Object.keys(d).sort().join());
		return keys.every((k) => k === keys[0]);
	})()`)
	if !same {
		t.Error("the English and Korean dictionaries have different keys")
	}
}

// The usage view's pure rules: periods in UTC days, series ordered by total with the tail
// folded into "others", the axis scale, and the key form's body.
func TestConsoleUsageRules(t *testing.T) {
	plain := heldFake("plain", nil, nil)
	gw := startGateway(t, "providers: [{name: plain, kind: fake, models: [{id: echo}]}]", map[string]llm.Backend{"plain": plain})
	p := openConsole(t, gw.URL, "en-US", "chat")
	got := eval[string](p, `(async () => {
		const { period, decimals } = await import('/ui/js/usage.js');
		const { series, scale } = await import('/ui/js/chart.js');
		const { limitsBody, unset } = await import('/ui/js/keys.js');
		const now = Date.parse('2026-03-01T23:30:00Z');
		const short = (p) => p && [p.days[0], p.days.at(-1), p.days.length, p.from, p.to].join(' ');
		const rows = [];
		for (let i = 0; i < 10; i++) rows.push({ key: 'k' + i, day: '2026-02-28', cost_usd: 10 - i });
		rows.push({ key: 'k0', day: '2026-03-01', cost_usd: 1 }, { key: 'zero', day: '2026-03-01', cost_usd: 0 },
			{ key: 'k1', day: '2025-01-01', cost_usd: 99 });
		const s = series(rows, 'key', (r) => r.cost_usd, ['2026-02-28', '2026-03-01']);
		let bad = '';
		try { limitsBody({ weight: '0' }, false); } catch (e) { bad = e.field; }
		return JSON.stringify({
			p: [short(period('7d', now)), short(period('month', now)), short(period('lastmonth', now)), short(period('30d', now)),
				short(period('custom', now, '2026-02-27', '2026-02-28')), period('custom', now, '2026-02-28', '2026-02-27')],
			s: s.map((x) => [x.name, x.values.join('+')].join(':')),
			scale: [scale(0), scale(0.7), scale(2.2), scale(4.1), scale(1000), scale(0.00011)].map((x) => x.max + '/' + x.steps),
			decimals: [1, 2.5, 0.25, 0.5, 0.00005, 250].map(decimals),
			create: limitsBody({ name: ' a ', weight: '', max_running: '2', 'rl.rpm': '', 'rl.tpm': '100', models: 'x/*, y/*',
				max_priority: '', 'budget.usd': '1.5', 'budget.period': 'week' }, false),
			edit: limitsBody({ weight: '3', models: ' ', 'budget.usd': '' }, true),
			bad, half: (() => { try { limitsBody({ weight: '0.5' }, true); return ''; } catch (e) { return e.field; } })(),
			unset: [null, undefined, 0, '', 1, 'normal'].map(unset),
		});
	})()`)
	want := `{"p":["2026-02-23 2026-03-01 7 2026-02-23T00:00:00Z 2026-03-02T00:00:00Z",` +
		`"2026-03-01 2026-03-01 1 2026-03-01T00:00:00Z 2026-03-02T00:00:00Z",` +
		`"2026-02-01 2026-02-28 28 2026-02-01T00:00:00Z 2026-03-01T00:00:00Z",` +
		`"2026-01-31 2026-03-01 30 2026-01-31T00:00:00Z 2026-03-02T00:00:00Z",` +
		`"2026-02-27 2026-02-28 2 2026-02-27T00:00:00Z 2026-03-01T00:00:00Z",null],` +
		`"s":["k0:10+1","k1:9+0","k2:8+0","k3:7+0","k4:6+0","k5:5+0","k6:4+0",":6+0"],` +
		`"scale":["1/4","1/4","2.5/5","5/5","1000/4","0.0002/4"],"decimals":[0,1,2,1,5,0],` +
		`"create":{"max_running":2,"rate_limit":{"tpm":100},"models":["x/*","y/*"],"budget":{"usd":1.5,"period":"week"},"name":"a"},` +
		`"edit":{"weight":3,"max_running":null,"max_queued":null,"rate_limit":null,"models":null,"max_priority":null,"budget":null},` +
		`"bad":"weight","half":"weight","unset":[true,true,true,true,false,false]}`
	if got != want {
		t.Errorf("usage rules:\n got %s\nwant %s", got, want)
	}
}
