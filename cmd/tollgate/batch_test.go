package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/internal/fakellm"
	"github.com/tollgate/tollgate/providers/llm"
)

// The batch route (SPEC §5) over HTTP, against the gateway as the binary wires it.

const batchConfig = `
providers:
  - name: codex
    kind: fake
    lanes: 3
    models: [{id: a}, {id: b}, {id: c}, {id: d}]
  - name: claude
    kind: fake
    lanes: 1
    models: [{id: m}]
  - name: broken
    kind: fake
    lanes: 1
    models: [{id: x}]
`

// failing is a backend whose calls fail: at open, or after one chunk when midway.
type failing struct{ midway bool }

func (f failing) Open(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	if !f.midway {
		return nil, &llm.Error{Kind: llm.KindUpstream, Provider: "broken", Message: "the backend is broken"}
	}
	return &failingStream{}, nil
}

type failingStream struct{ sent bool }

func (s *failingStream) Next() (llm.Chunk, error) {
	if !s.sent {
		s.sent = true
		return llm.Chunk{Role: "assistant", Content: "par"}, nil
	}
	return llm.Chunk{}, &llm.Error{Kind: llm.KindUpstream, Provider: "broken", Message: "the backend broke midway"}
}

func (s *failingStream) Close() error { return nil }

func postBatch(ctx context.Context, url, body string) answer {
	req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/batch/chat/completions", strings.NewReader(body))
	res, err := rawClient.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer res.Body.Close()
	var b strings.Builder
	_, err = bufio.NewReader(res.Body).WriteTo(&b)
	return answer{status: res.StatusCode, header: res.Header, body: b.String(), err: err}
}

func batchBody(stream bool, models ...string) string {
	m, _ := json.Marshal(models)
	s, _ := json.Marshal(stream)
	return `{"models":` + string(m) + `,"stream":` + string(s) + `,"messages":[{"role":"user","content":"hi"}]}`
}

type batchError struct {
	Error struct {
		Code           string `json:"code"`
		Message        string `json:"message"`
		Param          string `json:"param"`
		RetryAfterMs   *int64 `json:"retry_after_ms"`
		ProviderLimits []struct {
			Provider  *string `json:"provider"`
			Model     *string `json:"model"`
			Requested int     `json:"requested"`
			Limit     int     `json:"limit"`
		} `json:"provider_limits"`
	} `json:"error"`
}

func TestBatchRefusalsOverHTTP(t *testing.T) {
	bs, held := heldSet("codex", "claude")
	bs["broken"] = failing{}
	g := startGateway(t, batchConfig, bs)
	ctx := context.Background()

	// 4 codex members with 3 lanes: it can never start. Only the overflowing scope is listed.
	a := postBatch(ctx, g.URL, batchBody(false, "codex/a", "codex/b", "codex/c", "codex/d", "claude/m"))
	var e batchError
	if err := json.Unmarshal([]byte(a.body), &e); err != nil || a.status != 400 {
		t.Fatalf("%d %s", a.status, a.body)
	}
	if e.Error.Code != "batch_exceeds_provider_capacity" || len(e.Error.ProviderLimits) != 1 {
		t.Fatalf("body %s", a.body)
	}
	l := e.Error.ProviderLimits[0]
	if l.Provider == nil || *l.Provider != "codex" || l.Model != nil || l.Requested != 4 || l.Limit != 3 {
		t.Errorf("provider_limits %s", a.body)
	}
	if !strings.Contains(a.body, `"model":null`) {
		t.Errorf("provider_limits must carry model null for a provider's lanes: %s", a.body)
	}
	if a.header.Get("Retry-After") != "" || a.header.Get("retry-after-ms") != "" || e.Error.RetryAfterMs != nil {
		t.Errorf("a batch that can never start advises a wait: %v %s", a.header, a.body)
	}

	// It could fit, but claude's lane is busy now: 429 with a wait, and nothing runs.
	running := postAsync(ctx, g.URL, "claude/m", "", false)
	c := held.next(t)
	checkBusy(t, postBatch(ctx, g.URL, batchBody(false, "codex/a", "claude/m")), "batch_capacity_unavailable")
	select {
	case extra := <-held.opened:
		t.Fatalf("a refused batch called %s/%s", extra.backend, extra.model)
	default:
	}
	close(c.release)
	await(t, running)

	for _, tc := range []struct{ body, code, param string }{
		{`{"messages":[{"role":"user","content":"hi"}]}`, "invalid_request", "models"},
		{`{"models":"codex/a","messages":[{"role":"user","content":"hi"}]}`, "invalid_request", "models"},
		{batchBody(false, "codex/a"), "invalid_request", "models"},
		{`{"model":"codex/a","models":["codex/a","codex/b"],"messages":[{"role":"user","content":"hi"}]}`, "invalid_request", "model"},
		{`{"models":["codex/a",""],"messages":[{"role":"user","content":"hi"}]}`, "invalid_request", "models[1]"},
		{`{"models":["codex/a","codex/b"]}`, "invalid_request", "messages"},
		{batchBody(false, "codex/a", "codex/b", "codex/c", "claude/m", "broken/x", "codex/a", "codex/b", "codex/c", "claude/m", "broken/x", "codex/a"), "batch_too_large", "models"},
		{batchBody(false, "codex/a", "nope/z"), "model_not_found", "models[1]"},
	} {
		a := postBatch(ctx, g.URL, tc.body)
		var e batchError
		_ = json.Unmarshal([]byte(a.body), &e)
		if a.status/100 != 4 || a.status == 429 || e.Error.Code != tc.code || e.Error.Param != tc.param {
			t.Errorf("%s: %d %s, want %s naming %s", tc.body, a.status, a.body, tc.code, tc.param)
		}
		if a.header.Get("Retry-After") != "" {
			t.Errorf("%s: Retry-After on an answer waiting cannot fix", tc.body)
		}
	}
	select {
	case extra := <-held.opened:
		t.Fatalf("a refused batch called %s/%s", extra.backend, extra.model)
	default:
	}
	g.waitIdle(t)
	fams := scrape(t, g.URL, "")
	for _, want := range [][]string{
		{"code=batch_capacity_unavailable", "provider=claude"},
		{"code=batch_exceeds_provider_capacity", "provider="},
	} {
		if v := value(t, fams, "tollgate_rejections_total", want...); v != 1 {
			t.Errorf("tollgate_rejections_total{%v} = %v, want 1", want, v)
		}
	}
}

// TestBatchOverHTTP: every member's backend is called before any answers; the results come
// in request order, and one member's failure is its own.
func TestBatchOverHTTP(t *testing.T) {
	bs, held := heldSet("codex", "claude")
	bs["broken"] = failing{}
	g := startGateway(t, batchConfig, bs)
	ch := make(chan answer, 1)
	go func() {
		ch <- postBatch(context.Background(), g.URL, batchBody(false, "claude/m", "codex/b", "broken/x", "codex/a"))
	}()
	calls := []*heldCall{held.next(t), held.next(t), held.next(t)} // all three begun, none answered
	for _, c := range calls {
		close(c.release)
	}
	a := await(t, ch)
	if a.status != 200 {
		t.Fatalf("%d %s", a.status, a.body)
	}
	var out struct {
		Object  string `json:"object"`
		Results []struct {
			Model      string `json:"model"`
			QueueMs    *int64 `json:"queue_ms"`
			Completion *struct {
				Object  string `json:"object"`
				Choices []struct {
					Message struct{ Content string } `json:"message"`
				} `json:"choices"`
			} `json:"completion"`
			Error *struct{ Code, Message string } `json:"error"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(a.body), &out); err != nil || out.Object != "batch.chat.completion" || len(out.Results) != 4 {
		t.Fatalf("body %s (%v)", a.body, err)
	}
	for i, want := range []string{"claude/m", "codex/b", "broken/x", "codex/a"} {
		r := out.Results[i]
		if r.Model != want || r.QueueMs == nil || *r.QueueMs != 0 {
			t.Errorf("result %d: %+v, want model %s with queue_ms 0", i, r, want)
		}
		if want == "broken/x" {
			if r.Error == nil || r.Error.Code != "upstream_error" || r.Completion != nil {
				t.Errorf("the broken member: %s", a.body)
			}
			continue
		}
		if r.Completion == nil || r.Error != nil || r.Completion.Object != "chat.completion" ||
			len(r.Completion.Choices) != 1 || r.Completion.Choices[0].Message.Content != want {
			t.Errorf("result %d: %s", i, a.body)
		}
	}
	g.waitIdle(t)
	// Each member counts as a request of its own model; the broken one as its failure.
	fams := scrape(t, g.URL, "")
	for _, want := range [][]string{
		{"code=", "model=claude/m", "provider=claude", "status=200"},
		{"code=", "model=codex/a", "provider=codex", "status=200"},
		{"code=upstream_error", "model=broken/x", "provider=broken", "status=502"},
	} {
		if v := value(t, fams, "tollgate_requests_total", want...); v != 1 {
			t.Errorf("tollgate_requests_total{%v} = %v, want 1", want, v)
		}
	}
}

// TestBatchStreamOverHTTP: chunks carry their member's batch_index, a member that breaks
// midway ends with its own error event, and one [DONE] ends the whole.
func TestBatchStreamOverHTTP(t *testing.T) {
	bs, held := heldSet("codex", "claude")
	bs["broken"] = failing{midway: true}
	g := startGateway(t, batchConfig, bs)
	ch := make(chan answer, 1)
	go func() {
		ch <- postBatch(context.Background(), g.URL, batchBody(true, "codex/a", "broken/x", "claude/m"))
	}()
	for range 2 {
		close(held.next(t).release)
	}
	a := await(t, ch)
	if a.status != 200 || !strings.HasPrefix(a.header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("%d %v %s", a.status, a.header, a.body)
	}
	text := map[int]string{}
	errs := map[int]string{}
	done := 0
	var lines []string
	for line := range strings.Lines(a.body) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		lines = append(lines, line)
		data := strings.TrimPrefix(line, "data: ")
		if data == "[DONE]" {
			done++
			continue
		}
		var ev struct {
			BatchIndex *int   `json:"batch_index"`
			Object     string `json:"object"`
			Choices    []struct {
				Delta struct{ Content string } `json:"delta"`
			} `json:"choices"`
			Error *struct{ Code string } `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil || ev.BatchIndex == nil {
			t.Fatalf("event without batch_index: %s", data)
		}
		switch {
		case ev.Error != nil:
			errs[*ev.BatchIndex] = ev.Error.Code
		case ev.Object == "chat.completion.chunk":
			for _, c := range ev.Choices {
				text[*ev.BatchIndex] += c.Delta.Content
			}
		default:
			t.Errorf("unexpected event %s", data)
		}
	}
	if done != 1 || lines[len(lines)-1] != "data: [DONE]" {
		t.Errorf("want one [DONE], last: %d in %q", done, lines)
	}
	if text[0] != "codex/a" || text[1] != "par" || text[2] != "claude/m" {
		t.Errorf("member texts %v", text)
	}
	if len(errs) != 1 || errs[1] != "upstream_error" {
		t.Errorf("member errors %v, want only member 1's upstream_error", errs)
	}
	g.waitIdle(t)
}

// TestBatchDisconnectOverHTTP: a client that leaves a streamed batch stops every member's
// backend call.
func TestBatchDisconnectOverHTTP(t *testing.T) {
	bs, held := heldSet("codex", "claude")
	g := startGateway(t, batchConfig, bs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", g.URL+"/v1/batch/chat/completions",
		strings.NewReader(batchBody(true, "codex/a", "codex/b", "claude/m")))
	type opened struct {
		res *http.Response
		err error
	}
	resc := make(chan opened, 1)
	go func() { res, err := rawClient.Do(req); resc <- opened{res, err} }() // exits with the request
	calls := []*heldCall{held.next(t), held.next(t), held.next(t)}
	o := <-resc
	if o.err != nil {
		t.Fatal(o.err)
	}
	// The role chunks are out: the members run. Read one, then hang up.
	line, err := bufio.NewReader(o.res.Body).ReadString('\n')
	if err != nil || !strings.Contains(line, `"batch_index"`) {
		t.Fatalf("first line %q: %v", line, err)
	}
	cancel()
	o.res.Body.Close()
	for _, c := range calls {
		select {
		case <-c.ctx.Done():
		case <-time.After(stepTimeout):
			t.Fatalf("the backend call of %s/%s was not cancelled", c.backend, c.model)
		}
	}
	g.waitIdle(t)
}

// TestCLIBatchHangUp: a client that leaves a streamed batch of real CLIs (Codex and Claude
// Code against fakellm) leaves none of their processes alive.
func TestCLIBatchHangUp(t *testing.T) {
	fake := newTappedFake(t, fakellm.Options{Chunks: 400, ChunkInterval: 50 * time.Millisecond}, nil)
	marker := newMarker(t)
	codex := cliConfig(t, cliKinds[0], fake.URL, marker)
	claude := cliConfig(t, cliKinds[1], fake.URL, marker)
	g := startGateway(t, codex+strings.TrimPrefix(strings.TrimSpace(claude), "providers:"), nil)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", g.URL+"/v1/batch/chat/completions",
		strings.NewReader(batchBody(true, "codex/model-a", "claude/model-b")))
	done := make(chan error, 1)
	go func() { // ends when the answer does: at the latest when ctx is cancelled
		res, err := rawClient.Do(req)
		if err == nil {
			_, err = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
		done <- err
	}()
	// Both members' CLIs are answering: fakellm has their calls in flight.
	deadline := time.Now().Add(60 * time.Second)
	for {
		c := fake.counts()
		if c.calls["model-a"] > 0 && c.calls["model-b"] > 0 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the batch ended before both CLIs called the backend: %v (calls %v)", err, c.calls)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the CLIs never both called the backend: %v", c.calls)
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
	alive := markedProcesses(t, marker)
	if alive == 0 {
		t.Fatal("no marked process while the CLIs answer: the /proc scan finds nothing")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the client's answer did not end within 5s of cancelling")
	}
	gone := waitNoProcesses(t, marker, 5*time.Second)
	t.Logf("%d CLI processes alive at the hang-up; none left %v later", alive, gone.Round(time.Millisecond))
	g.waitIdle(t)
}
