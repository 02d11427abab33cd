package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/tollgate/tollgate/cmd/internal/fakellm"
)

// The answer fakellm gives every quirk request. Each of its six pieces (one per chunk) holds
// multi-byte characters, so split-utf8 and slow-drip cut inside a character in every event.
const (
	quirkReply  = "Grüße 世界 🎉 für ✓ 終わり"
	quirkChunks = 6
	// quirkPrefix is what arrives before error-midstream and drop strike (3 chunks).
	quirkPrefix = "Grüße 世界 🎉"
	// quirkThoughts is fakellm's reasoning text in the reasoning modes.
	quirkThoughts = "The user wants a short, friendly answer."
)

// quirkProviders are the gateway providers of the quirk tests: every API family the adapters
// speak, the OpenAI-compatible vendors whose own quirks fakellm imitates, and a short-run_timeout
// twin of each family for hang (a run_timeout short enough for hang would make slow-drip flaky
// under -race on a busy machine, so the other modes keep the default).
var quirkProviders = map[string]struct{ kind, path, runTimeout string }{
	"openai":          {"openai", "/v1", ""},
	"deepseek":        {"deepseek", "/v1", ""},
	"qwen":            {"qwen", "/v1", ""},
	"ernie":           {"ernie", "/v1", ""},
	"ollama":          {"ollama", "/v1", ""},
	"anthropic":       {"anthropic", "", ""}, // the adapter appends /v1/messages
	"gemini":          {"gemini", "/v1beta", ""},
	"openai-short":    {"openai", "/v1", "300ms"},
	"anthropic-short": {"anthropic", "", "300ms"},
	"gemini-short":    {"gemini", "/v1beta", "300ms"},
}

// quirkCase is one fakellm mode through one provider. The expectations hold for both the
// non-streaming and the streaming call, except where midCode says a stream breaks after its
// first chunks: then the stream is a 200 carrying quirkPrefix and one error event.
type quirkCase struct {
	provider, mode string
	status         int    // 200: the answer is quirkReply
	code           string // SPEC §4 code of a failure
	retryAfter     string // exact Retry-After; "" means the header must be absent
	shouldRetry    string // exact x-should-retry; "" means absent
	midCode        string // streaming only: the code of the in-stream error event
	reasoning      bool   // the answer carries quirkThoughts as reasoning_content
	clientGone     bool   // the backend must see the gateway hang up (hang)
}

func (c quirkCase) model() string { return c.provider + "/quirk-" + c.mode }

// Success and failure rows shared by the three API families.
func familyCases(p string) []quirkCase {
	short := p + "-short"
	midCode := "upstream_error"
	if p == "anthropic" {
		// Anthropic's in-stream error is overloaded_error: the provider is down, not broken.
		midCode = "provider_unavailable"
	}
	return []quirkCase{
		{provider: p, mode: "keepalive", status: 200},
		{provider: p, mode: "split-utf8", status: 200},
		{provider: p, mode: "slow-drip", status: 200},
		{provider: p, mode: "reasoning", status: 200, reasoning: true},
		{provider: p, mode: "keepalive+split-utf8+reasoning", status: 200, reasoning: true},
		{provider: p, mode: "rate-limit", status: 429, code: "upstream_rate_limited", retryAfter: "2"},
		{provider: p, mode: "overloaded", status: 503, code: "provider_unavailable", retryAfter: "1"},
		{provider: p, mode: "quota", status: 402, code: "upstream_quota_exhausted", shouldRetry: "false"},
		{provider: p, mode: "garbage", status: 502, code: "upstream_error"},
		// A dropped connection cuts the answer off: never passed off as a complete one.
		{provider: p, mode: "drop", status: 502, code: "upstream_truncated", midCode: "upstream_truncated"},
		{provider: p, mode: "error-midstream", status: 502, code: "upstream_error", midCode: midCode},
		{provider: short, mode: "hang", status: 504, code: "provider_run_timeout", shouldRetry: "false", clientGone: true},
	}
}

func quirkCases() []quirkCase {
	var cs []quirkCase
	for _, p := range []string{"openai", "anthropic", "gemini"} {
		cs = append(cs, familyCases(p)...)
	}
	return append(cs,
		// Vendor quirks, each through the kind that meets it in the wild.
		quirkCase{provider: "openai", mode: "quota-402", status: 402, code: "upstream_quota_exhausted", shouldRetry: "false"},
		quirkCase{provider: "deepseek", mode: "quota-402", status: 402, code: "upstream_quota_exhausted", shouldRetry: "false"},
		quirkCase{provider: "deepseek", mode: "keepalive+reasoning", status: 200, reasoning: true},
		// Errors inside a 200: no backend hint, so the gateway's own retry_after (1s).
		quirkCase{provider: "qwen", mode: "error-200-dashscope", status: 429, code: "upstream_rate_limited", retryAfter: "1"},
		quirkCase{provider: "ernie", mode: "error-200-qianfan", status: 429, code: "upstream_rate_limited", retryAfter: "1"},
		quirkCase{provider: "ollama", mode: "ollama-reasoning", status: 200, reasoning: true},
		// The same vendor bodies reaching the Anthropic adapter (vendors serve Anthropic-compatible
		// endpoints too) are not messages: a failure, never an empty success.
		quirkCase{provider: "anthropic", mode: "error-200-dashscope", status: 502, code: "upstream_error"},
		quirkCase{provider: "anthropic", mode: "error-200-qianfan", status: 502, code: "upstream_error"},
		// Gemini's nested errors: RetryInfo gives the wait; a per-day quota is not a wait.
		quirkCase{provider: "gemini", mode: "gemini-nested-error", status: 429, code: "upstream_rate_limited", retryAfter: "7"},
		quirkCase{provider: "gemini", mode: "gemini-daily-quota", status: 402, code: "upstream_quota_exhausted", shouldRetry: "false"},
	)
}

// quirkConfig lists, per provider, the quirk models the cases use.
func quirkConfig(base string, cases []quirkCase) string {
	models := map[string][]string{}
	for _, c := range cases {
		models[c.provider] = append(models[c.provider], "quirk-"+c.mode)
	}
	names := make([]string, 0, len(models))
	for n := range models {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("providers:\n")
	for _, n := range names {
		p := quirkProviders[n]
		fmt.Fprintf(&b, "  - name: %s\n    kind: %s\n    base_url: %s%s\n    keys: [\"sk-quirk-%s\"]\n%s", n, p.kind, base, p.path, n, noResilience)
		if p.runTimeout != "" {
			fmt.Fprintf(&b, "    run_timeout: %s\n", p.runTimeout)
		}
		b.WriteString("    models:\n")
		for _, m := range models[n] {
			fmt.Fprintf(&b, "      - id: %s\n", m)
		}
	}
	return b.String()
}

// TestQuirksThroughGateway drives every fakellm quirk mode, through every API family it
// applies to, with the official openai-go client, streaming and not.
func TestQuirksThroughGateway(t *testing.T) {
	fk := fakellm.New(fakellm.Options{Reply: quirkReply, Chunks: quirkChunks})
	backend := httptest.NewServer(fk)
	t.Cleanup(backend.Close)
	cases := quirkCases()
	g := startGateway(t, quirkConfig(backend.URL, cases), nil)
	for _, tc := range cases {
		for _, stream := range []bool{false, true} {
			name := fmt.Sprintf("%s/%s/stream=%v", tc.provider, tc.mode, stream)
			t.Run(name, func(t *testing.T) {
				gone := fk.Stats().ClientGone
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				start := time.Now()
				if stream {
					checkQuirkStream(ctx, t, g.URL, tc)
				} else {
					checkQuirkWhole(ctx, t, g.URL, tc)
				}
				if d := time.Since(start); d > 3*time.Second {
					t.Errorf("the call took %v", d)
				}
				if tc.clientGone {
					waitClientGone(t, fk, gone+1)
				}
				g.waitIdle(t)
				waitBackendIdle(t, fk)
			})
		}
	}
}

func checkQuirkWhole(ctx context.Context, t *testing.T, url string, tc quirkCase) {
	t.Helper()
	c, tape := tapedClient(url)
	res, err := c.Chat.Completions.New(ctx, userParams(tc.model()))
	tape.checkGatewayHeaders(t)
	if tc.status != 200 {
		checkQuirkError(t, err, tape, tc)
		return
	}
	if err != nil {
		t.Fatalf("want success, got %v", err)
	}
	if tape.status != 200 {
		t.Fatalf("status %d", tape.status)
	}
	msg := res.Choices[0].Message
	if msg.Content != quirkReply || res.Choices[0].FinishReason != "stop" {
		t.Fatalf("content %q finish %q", msg.Content, res.Choices[0].FinishReason)
	}
	checkReasoning(t, tc, jsonString(t, msg.JSON.ExtraFields["reasoning_content"].Raw()))
}

func checkQuirkStream(ctx context.Context, t *testing.T, url string, tc quirkCase) {
	t.Helper()
	c, tape := tapedClient(url)
	s := c.Chat.Completions.NewStreaming(ctx, userParams(tc.model()))
	var text, reasoning strings.Builder
	var finish string
	for s.Next() {
		ch := s.Current()
		if len(ch.Choices) == 0 {
			continue
		}
		text.WriteString(ch.Choices[0].Delta.Content)
		reasoning.WriteString(jsonString(t, ch.Choices[0].Delta.JSON.ExtraFields["reasoning_content"].Raw()))
		if f := ch.Choices[0].FinishReason; f != "" {
			finish = f
		}
	}
	err := s.Err()
	s.Close() // drains the rest into the tape: nothing may follow an error event
	tape.checkGatewayHeaders(t)
	switch {
	case tc.status == 200:
		if err != nil {
			t.Fatalf("want success, got %v", err)
		}
		if text.String() != quirkReply || finish != "stop" {
			t.Fatalf("text %q finish %q", text.String(), finish)
		}
		checkReasoning(t, tc, reasoning.String())
		if !bytes.HasSuffix(tape.body.Bytes(), []byte("data: [DONE]\n\n")) {
			t.Fatalf("stream does not end with [DONE]: %q", tail(tape.body.String()))
		}
	case tc.midCode != "":
		checkMidstream(t, err, tape, text.String(), tc.midCode)
	default:
		if text.Len() > 0 {
			t.Errorf("a failed stream delivered text %q", text.String())
		}
		checkQuirkError(t, err, tape, tc)
	}
}

// checkQuirkError asserts a whole error answer: status and code as the SDK sees them,
// Retry-After and retry-after-ms present with the expected wait or both absent, x-should-retry.
func checkQuirkError(t *testing.T, err error, tape *tape, tc quirkCase) {
	t.Helper()
	var apiErr *oai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("want *openai.Error, got %T %v", err, err)
	}
	if apiErr.StatusCode != tc.status || apiErr.Code != tc.code {
		t.Fatalf("status %d code %q, want %d %q: %s", apiErr.StatusCode, apiErr.Code, tc.status, tc.code, tape.body.String())
	}
	h := apiErr.Response.Header
	if got := h.Get("Retry-After"); got != tc.retryAfter {
		t.Errorf("Retry-After %q, want %q", got, tc.retryAfter)
	}
	if got := h.Get("x-should-retry"); got != tc.shouldRetry {
		t.Errorf("x-should-retry %q, want %q", got, tc.shouldRetry)
	}
	var body struct {
		Error struct {
			Code         string `json:"code"`
			Provider     string `json:"provider"`
			RetryAfterMs *int64 `json:"retry_after_ms"`
		} `json:"error"`
	}
	if err := json.Unmarshal(tape.body.Bytes(), &body); err != nil {
		t.Fatalf("error body: %v: %q", err, tape.body.String())
	}
	if body.Error.Code != tc.code || body.Error.Provider != tc.provider {
		t.Errorf("body code %q provider %q", body.Error.Code, body.Error.Provider)
	}
	wantMs := ""
	if tc.retryAfter != "" {
		s, _ := strconv.Atoi(tc.retryAfter)
		wantMs = strconv.Itoa(s * 1000)
	}
	if got := h.Get("retry-after-ms"); got != wantMs {
		t.Errorf("retry-after-ms %q, want %q", got, wantMs)
	}
	gotMs := ""
	if body.Error.RetryAfterMs != nil {
		gotMs = strconv.FormatInt(*body.Error.RetryAfterMs, 10)
	}
	if gotMs != wantMs {
		t.Errorf("body retry_after_ms %q, want %q", gotMs, wantMs)
	}
}

// checkMidstream asserts a stream that broke after its first chunks: a 200 whose text is what
// came before the break, then exactly one error event, then the end: no [DONE].
func checkMidstream(t *testing.T, err error, tape *tape, text, code string) {
	t.Helper()
	var se *ssestream.StreamError
	if !errors.As(err, &se) {
		t.Fatalf("want an in-stream error event, got %T %v (text %q)", err, err, text)
	}
	if tape.status != 200 || text != quirkPrefix {
		t.Fatalf("status %d text %q, want 200 %q", tape.status, text, quirkPrefix)
	}
	var ev struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(se.Event.Data, &ev); err != nil || ev.Error.Code != code || ev.Error.Message == "" {
		t.Fatalf("error event %q (%v), want code %q", se.Event.Data, err, code)
	}
	raw := tape.body.String()
	if strings.Contains(raw, "[DONE]") || strings.Count(raw, `{"error":`) != 1 {
		t.Fatalf("after an error event the stream must end: %q", tail(raw))
	}
	if !strings.HasSuffix(raw, "data: "+string(bytes.TrimSpace(se.Event.Data))+"\n\n") {
		t.Fatalf("the error event is not the last: %q", tail(raw))
	}
}

func checkReasoning(t *testing.T, tc quirkCase, got string) {
	t.Helper()
	want := ""
	if tc.reasoning {
		want = quirkThoughts
	}
	if got != want {
		t.Fatalf("reasoning_content %q, want %q", got, want)
	}
}

// jsonString decodes a raw JSON string ("" for an absent field).
func jsonString(t *testing.T, raw string) string {
	t.Helper()
	if raw == "" || raw == "null" {
		return ""
	}
	var s string
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		t.Fatalf("not a JSON string: %q", raw)
	}
	return s
}

func waitClientGone(t *testing.T, fk *fakellm.Server, n int64) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for fk.Stats().ClientGone < n {
		if time.Now().After(deadline) {
			t.Fatalf("the backend never saw the gateway hang up: %+v", fk.Stats())
		}
		time.Sleep(2 * time.Millisecond) // polling with a deadline
	}
}

// waitBackendIdle: once the gateway is idle no backend call may be left running (the lane
// is given back only after the backend stopped).
func waitBackendIdle(t *testing.T, fk *fakellm.Server) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for fk.Stats().Concurrent != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("a backend call outlived its client: %+v", fk.Stats())
		}
		time.Sleep(2 * time.Millisecond) // polling with a deadline
	}
}

func tail(s string) string {
	if len(s) > 300 {
		return "…" + s[len(s)-300:]
	}
	return s
}

// tape records the one HTTP exchange of an SDK call: status, headers and every body byte,
// including what the SDK did not read before closing (drained on Close).
type tape struct {
	status int
	header http.Header
	body   bytes.Buffer
}

type tapeTransport struct{ t *tape }

func (tt tapeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	tt.t.status, tt.t.header = res.StatusCode, res.Header
	res.Body = &tapedBody{rc: res.Body, tape: tt.t}
	return res, nil
}

type tapedBody struct {
	rc   io.ReadCloser
	tape *tape
}

func (b *tapedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.tape.body.Write(p[:n])
	return n, err
}

// Close reads what is left (bounded by the request's context) so the tape holds the whole body.
func (b *tapedBody) Close() error {
	_, _ = io.Copy(&b.tape.body, b.rc)
	return b.rc.Close()
}

// tapedClient is sdkClient with a tape of its exchange.
func tapedClient(url string) (oai.Client, *tape) {
	tp := &tape{}
	c := oai.NewClient(option.WithBaseURL(url+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0),
		option.WithHTTPClient(&http.Client{Transport: tapeTransport{tp}}))
	return c, tp
}

// checkGatewayHeaders: every chat answer, success or error, names its request and queue wait.
func (tp *tape) checkGatewayHeaders(t *testing.T) {
	t.Helper()
	if tp.header == nil {
		t.Fatal("no response")
	}
	if tp.header.Get("X-Request-Id") == "" || tp.header.Get("X-Gateway-Queue-Ms") == "" {
		t.Errorf("missing X-Request-Id or X-Gateway-Queue-Ms: %v", tp.header)
	}
}
