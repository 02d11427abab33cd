package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// answer is one finished HTTP exchange.
type answer struct {
	status  int
	header  http.Header
	body    string
	err     error
	started time.Time
}

func post(ctx context.Context, url, model, prio string, stream bool) answer {
	body := fmt.Sprintf(`{"model":%q,"stream":%v,"messages":[{"role":"user","content":"hi"}]}`, model, stream)
	req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/chat/completions", strings.NewReader(body))
	if prio != "" {
		req.Header.Set("X-Gateway-Priority", prio)
	}
	return do(req)
}

// do sends req and reads its whole answer.
func do(req *http.Request) answer {
	res, err := rawClient.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return answer{status: res.StatusCode, header: res.Header, body: string(b), err: err}
}

func postAsync(ctx context.Context, url, model, prio string, stream bool) chan answer {
	ch := make(chan answer, 1)
	go func() { ch <- post(ctx, url, model, prio, stream) }() // exits with the request
	return ch
}

func await(t *testing.T, ch chan answer) answer {
	t.Helper()
	select {
	case a := <-ch:
		if a.err != nil {
			t.Fatal(a.err)
		}
		return a
	case <-time.After(5 * time.Second):
		t.Fatal("no answer within 5s")
		return answer{}
	}
}

// checkBusy asserts a well-formed SPEC §4 "busy" answer.
func checkBusy(t *testing.T, a answer, code string) {
	t.Helper()
	if a.status != 429 {
		t.Fatalf("status %d, want 429: %s", a.status, a.body)
	}
	ra, err := strconv.Atoi(a.header.Get("Retry-After"))
	if err != nil || ra < 1 || ra > 60 {
		t.Errorf("Retry-After %q", a.header.Get("Retry-After"))
	}
	ms, err := strconv.Atoi(a.header.Get("retry-after-ms"))
	if err != nil || ms < 1000 {
		t.Errorf("retry-after-ms %q", a.header.Get("retry-after-ms"))
	}
	var body struct {
		Error struct {
			Code         string `json:"code"`
			Type         string `json:"type"`
			RetryAfterMs int    `json:"retry_after_ms"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(a.body), &body); err != nil {
		t.Fatalf("body %q: %v", a.body, err)
	}
	if body.Error.Code != code || body.Error.Type != "rate_limit_error" || body.Error.RetryAfterMs != ms {
		t.Errorf("body %s, want code %s and retry_after_ms %d", a.body, code, ms)
	}
	if a.header.Get("X-Gateway-Queue-Ms") == "" || a.header.Get("X-Request-Id") == "" {
		t.Errorf("missing gateway headers: %v", a.header)
	}
}

const oneLane = `
limits: {max_running: 10, max_admitted: 16}
providers:
  - name: p
    kind: fake
    lanes: 1
    queue_length: 1
    queue_timeout: 150ms
    models: [{id: m}]
`

func TestRejectionCodesOverHTTP(t *testing.T) {
	bs, held := heldSet("p")
	g := startGateway(t, oneLane, bs)
	ctx := context.Background()
	running := postAsync(ctx, g.URL, "p/m", "", false)
	c1 := held.next(t)

	// One waits in the queue; the next finds it full; the waiting one then times out.
	queued := postAsync(ctx, g.URL, "p/m", "", false)
	g.waitQueued(t, 1)
	checkBusy(t, post(ctx, g.URL, "p/m", "", false), "provider_queue_full")
	timedOut := await(t, queued)
	checkBusy(t, timedOut, "provider_queue_timeout")
	if ms, _ := strconv.Atoi(timedOut.header.Get("X-Gateway-Queue-Ms")); ms < 150 {
		t.Errorf("queue timeout after X-Gateway-Queue-Ms %d, want ≥ 150", ms)
	}
	close(c1.release)
	if a := await(t, running); a.status != 200 {
		t.Fatalf("running call: %d %s", a.status, a.body)
	}
	g.waitIdle(t)
}

func TestGatewayOverloadedOverHTTP(t *testing.T) {
	bs, held := heldSet("p", "q")
	g := startGateway(t, `
limits: {max_running: 1, max_admitted: 2}
providers:
  - {name: p, kind: fake, lanes: 1, models: [{id: m}]}
  - {name: q, kind: fake, lanes: 1, models: [{id: m}]}
`, bs)
	ctx := context.Background()
	r1 := postAsync(ctx, g.URL, "p/m", "", false)
	c1 := held.next(t)
	r2 := postAsync(ctx, g.URL, "q/m", "", false) // q has a free lane but the gateway cap is full
	g.waitQueued(t, 1)
	checkBusy(t, post(ctx, g.URL, "q/m", "", true), "gateway_overloaded")
	close(c1.release)
	await(t, r1)
	close(held.next(t).release)
	if a := await(t, r2); a.status != 200 {
		t.Fatalf("queued call: %d", a.status)
	}
	g.waitIdle(t)
}

func TestQueueWaitHeaderIsTheRealWait(t *testing.T) {
	bs, held := heldSet("p")
	g := startGateway(t, strings.Replace(oneLane, "150ms", "10s", 1), bs)
	ctx := context.Background()
	sent := time.Now()
	r1 := postAsync(ctx, g.URL, "p/m", "", false)
	c1 := held.next(t)
	// The first call queues for no one: its wait is the dispatch hop alone, inside the
	// while it took to reach its backend (not 0 under load: the hop is real).
	window := time.Since(sent)
	r2 := postAsync(ctx, g.URL, "p/m", "", false)
	g.waitQueued(t, 1)
	start := time.Now()
	for time.Since(start) < 60*time.Millisecond { // keep it queued for a measurable while
		time.Sleep(5 * time.Millisecond) // the wait being measured, not synchronisation
	}
	close(c1.release)
	if a := await(t, r1); a.header.Get("X-Gateway-Queue-Ms") == "" {
		t.Error("first call: no X-Gateway-Queue-Ms")
	} else if ms, _ := strconv.Atoi(a.header.Get("X-Gateway-Queue-Ms")); int64(ms) > window.Milliseconds() {
		t.Errorf("first call waited %d ms, more than the %s it took to reach its backend", ms, window)
	}
	close(held.next(t).release)
	a := await(t, r2)
	if ms, _ := strconv.Atoi(a.header.Get("X-Gateway-Queue-Ms")); ms < 60 || ms > 5000 {
		t.Errorf("queued call's X-Gateway-Queue-Ms %d, want ≥ 60", ms)
	}
	g.waitIdle(t)
}

// TestDispatchOrderOverHTTP queues calls on a saturated gateway and checks the order they
// start in: class first, providers in turn, the least busy model, FIFO.
func TestDispatchOrderOverHTTP(t *testing.T) {
	bs, held := heldSet("a", "b")
	g := startGateway(t, `
limits: {max_running: 1, max_admitted: 32}
providers:
  - {name: a, kind: fake, lanes: 2, model_lanes: 1, models: [{id: x}, {id: y}]}
  - {name: b, kind: fake, lanes: 2, model_lanes: 1, models: [{id: x}]}
`, bs)
	ctx := context.Background()
	blocker := postAsync(ctx, g.URL, "a/x", "", false)
	first := held.next(t)
	var answers []chan answer
	queue := func(model, prio string) {
		answers = append(answers, postAsync(ctx, g.URL, model, prio, false))
		g.waitQueued(t, len(answers))
	}
	queue("b/x", "background")
	queue("a/x", "normal")
	queue("a/x", "normal")
	queue("a/y", "normal")
	queue("b/x", "normal")
	queue("a/y", "interactive")
	queue("b/x", "interactive")
	close(first.release)
	await(t, blocker)
	var order []string
	for range answers {
		c := held.next(t)
		order = append(order, c.backend+"/"+c.model)
		close(c.release)
	}
	for _, a := range answers {
		if r := await(t, a); r.status != 200 {
			t.Fatalf("status %d", r.status)
		}
	}
	// The cursor is per class. Interactive: a was served last (the blocker), so b goes
	// first, then a. Normal has served nobody yet and starts at a. Within a both models are
	// idle (one call runs at a time), so the model whose oldest call waited longest goes
	// first: x, then later x again (its second call is older than y's), then y.
	want := []string{
		"b/x", "a/y", // interactive
		"a/x", "b/x", "a/x", "a/y", // normal
		"b/x", // background
	}
	if strings.Join(order, " ") != strings.Join(want, " ") {
		t.Fatalf("start order\n got %v\nwant %v", order, want)
	}
	g.waitIdle(t)
}

func TestCancelWhileQueuedOverHTTP(t *testing.T) {
	bs, held := heldSet("p")
	g := startGateway(t, oneLane, bs)
	r1 := postAsync(context.Background(), g.URL, "p/m", "", false)
	c1 := held.next(t)
	ctx, cancel := context.WithCancel(context.Background())
	r2 := postAsync(ctx, g.URL, "p/m", "", true)
	g.waitQueued(t, 1)
	cancel()
	<-r2
	g.waitQueued(t, 0)
	close(c1.release)
	await(t, r1)
	g.waitIdle(t)
	select {
	case c := <-held.opened:
		t.Fatalf("the cancelled call reached the backend (%s)", c.model)
	default:
	}
}

func TestCancelWhileRunningOverHTTP(t *testing.T) {
	bs, held := heldSet("p")
	g := startGateway(t, oneLane, bs)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", g.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"p/m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	res, err := rawClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	c := held.next(t)
	if _, err := bufio.NewReader(res.Body).ReadString('\n'); err != nil { // the role chunk
		t.Fatal(err)
	}
	cancel()
	res.Body.Close()
	select {
	case <-c.ctx.Done():
	case <-time.After(time.Second):
		t.Fatal("backend call not cancelled after the hang-up")
	}
	select {
	case <-c.closed:
	case <-time.After(time.Second):
		t.Fatal("backend stream not closed")
	}
	g.waitIdle(t)
}

func TestRunTimeoutOverHTTP(t *testing.T) {
	bs, held := heldSet("p")
	g := startGateway(t, `
providers:
  - {name: p, kind: fake, run_timeout: 100ms, models: [{id: m}]}
`, bs)
	ctx := context.Background()
	whole := postAsync(ctx, g.URL, "p/m", "", false)
	held.next(t)
	a := await(t, whole)
	if a.status != 504 || !strings.Contains(a.body, `"code":"provider_run_timeout"`) || a.header.Get("x-should-retry") != "false" {
		t.Fatalf("non-streaming run timeout: %d %v %s", a.status, a.header, a.body)
	}
	streamed := postAsync(ctx, g.URL, "p/m", "", true)
	held.next(t)
	a = await(t, streamed)
	if a.status != 200 || !strings.Contains(a.body, `data: {"error":{`) || !strings.Contains(a.body, "provider_run_timeout") ||
		strings.Contains(a.body, "[DONE]") {
		t.Fatalf("streaming run timeout: %d %s", a.status, a.body)
	}
	g.waitIdle(t)
}

func TestLeastBusyModelFirstOverHTTP(t *testing.T) {
	bs, held := heldSet("a")
	g := startGateway(t, `
providers:
  - {name: a, kind: fake, lanes: 2, model_lanes: 2, models: [{id: x}, {id: y}]}
`, bs)
	ctx := context.Background()
	r1 := postAsync(ctx, g.URL, "a/x", "", false)
	r2 := postAsync(ctx, g.URL, "a/x", "", false)
	c1, c2 := held.next(t), held.next(t)
	older := postAsync(ctx, g.URL, "a/x", "", false)
	g.waitQueued(t, 1)
	newer := postAsync(ctx, g.URL, "a/y", "", false)
	g.waitQueued(t, 2)
	close(c1.release) // x still runs one call, y none: y goes first though x's call is older
	if c := held.next(t); c.model != "y" {
		t.Fatalf("started %s first, want the least busy model y", c.model)
	} else {
		close(c.release)
	}
	await(t, newer)
	close(c2.release)
	close(held.next(t).release)
	for _, r := range []chan answer{r1, r2, older} {
		if a := await(t, r); a.status != 200 {
			t.Fatalf("status %d", a.status)
		}
	}
	g.waitIdle(t)
}
