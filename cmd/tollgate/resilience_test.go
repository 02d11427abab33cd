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
	"strings"
	"sync"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tollgate/tollgate/actors"
	"github.com/tollgate/tollgate/cmd/internal/fakellm"
)

// The resilience rules of SPEC §10 and §12, end to end: the official openai-go client (its
// own retries off, so what the gateway did shows) through the gateway against fakellm with
// per-key and per-model scripts.

// arrival is one generation request as the backend saw it.
type arrival struct {
	key, model string
	at         time.Time
}

// recorded is fakellm behind a recorder of every generation request's key, model and
// arrival time.
type recorded struct {
	fake *fakellm.Server
	URL  string
	mu   sync.Mutex
	seen []arrival
}

func startRecorded(t *testing.T, opts fakellm.Options) *recorded {
	t.Helper()
	r := &recorded{fake: fakellm.New(opts)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodPost {
			body, _ := io.ReadAll(req.Body)
			req.Body = io.NopCloser(bytes.NewReader(body))
			var m struct {
				Model string `json:"model"`
			}
			_ = json.Unmarshal(body, &m)
			r.mu.Lock()
			r.seen = append(r.seen, arrival{key: strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer "), model: m.Model, at: time.Now()})
			r.mu.Unlock()
		}
		r.fake.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

func (r *recorded) arrivals() []arrival {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]arrival(nil), r.seen...)
}

// script sets the backend's per-key and per-model script.
func (r *recorded) script(t *testing.T, sc fakellm.Script) {
	t.Helper()
	if err := r.fake.SetScript(sc); err != nil {
		t.Fatal(err)
	}
}

// served is one call through the SDK: its answer or error, and the gateway's headers.
type served struct {
	text   string
	err    error
	header http.Header
}

func (s served) attempts() string { return s.header.Get("X-Gateway-Attempts") }
func (s served) model() string    { return s.header.Get("X-Gateway-Model") }

// apiError is the SDK's error of a failed call, or nil.
func (s served) apiError() *oai.Error {
	var e *oai.Error
	if errors.As(s.err, &e) {
		return e
	}
	return nil
}

// chatSDK makes one non-streaming call with the official client, its own retries off.
func chatSDK(ctx context.Context, url, model, prompt string, opts ...option.RequestOption) served {
	c := oai.NewClient(option.WithBaseURL(url+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	var resp *http.Response
	p := oai.ChatCompletionNewParams{Model: model, Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage(prompt)}}
	res, err := c.Chat.Completions.New(ctx, p, append(opts, option.WithResponseInto(&resp))...)
	out := served{err: err}
	if resp != nil {
		out.header = resp.Header
	} else {
		out.header = http.Header{}
	}
	if err == nil && len(res.Choices) > 0 {
		out.text = res.Choices[0].Message.Content
	}
	return out
}

// providerOf returns provider name's part of the gateway's state.
func providerOf(t *testing.T, g *gateway, name string) actors.ProviderState {
	t.Helper()
	for _, p := range g.Gateway.State().Providers {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no provider %s in the state", name)
	return actors.ProviderState{}
}

// waitProvider polls the state of provider name until cond holds (deadline 5 s).
func waitProvider(t *testing.T, g *gateway, name, what string, cond func(actors.ProviderState) bool) actors.ProviderState {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		p := providerOf(t, g, name)
		if cond(p) {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5s: %+v", what, p)
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
}

// keyedProvider is the YAML of one OpenAI-compatible provider on the recorded backend.
func keyedProvider(name, kind, url string, keys []string, extra string, models ...string) string {
	quoted := make([]string, len(keys))
	for i, k := range keys {
		quoted[i] = fmt.Sprintf("%q", k)
	}
	return fmt.Sprintf("  - name: %s\n    kind: %s\n    base_url: %s/v1\n    keys: [%s]\n%s    models: [%s]\n",
		name, kind, url, strings.Join(quoted, ", "), extra, strings.Join(models, ", "))
}

// TestKeyRotationOnThrottleIn200: DashScope throttles key A inside an HTTP 200; the call
// moves at once to key B and the client sees a success in two attempts. The next call goes
// straight to B while A rests.
func TestKeyRotationOnThrottleIn200(t *testing.T) {
	be := startRecorded(t, fakellm.Options{Reply: "served", Chunks: 1})
	be.script(t, fakellm.Script{Keys: map[string]fakellm.KeyScript{"key-a": {Mode: "throttle-200"}}})
	g := startGateway(t, "providers:\n"+keyedProvider("qwen", "qwen", be.URL, []string{"key-a", "key-b"}, "", "{id: qwen-plus}"), nil)
	ctx := context.Background()

	s := chatSDK(ctx, g.URL, "qwen/qwen-plus", "hi")
	if s.err != nil || s.text != "served" || s.attempts() != "2" {
		t.Fatalf("first call: %q %v, attempts %q; want a success in 2 attempts", s.text, s.err, s.attempts())
	}
	by := be.fake.Stats().ByKey
	if by["key-a"].Requests != 1 || by["key-a"].Served != 0 || by["key-b"].Served != 1 {
		t.Errorf("backend by key %+v: want key A refused once, key B serving", by)
	}
	if s := chatSDK(ctx, g.URL, "qwen/qwen-plus", "hi"); s.err != nil || s.attempts() != "1" {
		t.Errorf("second call: %v, attempts %q; want key B at once", s.err, s.attempts())
	}
	keys := providerOf(t, g, "qwen").Keys
	if len(keys) != 2 || keys[0].State != "cooling" || keys[0].CooldownMs <= 0 || keys[0].CooldownMs > 10_000 || keys[1].State != "ready" {
		t.Errorf("keys in /admin/state %+v: want key 0 cooling for at most key_cooldown (10s), key 1 ready", keys)
	}
	if n := be.fake.Stats().ByKey["key-a"].Requests; n != 1 {
		t.Errorf("key A was sent %d calls while it rested", n)
	}
}

// TestCooldownEndsAtTheHint: a key rate-limited with a hint rests exactly that long, then the
// call that waited for it probes it again and is served.
func TestCooldownEndsAtTheHint(t *testing.T) {
	be := startRecorded(t, fakellm.Options{Reply: "served", Chunks: 1})
	g := startGateway(t, "providers:\n"+keyedProvider("oa", "openai", be.URL, []string{"key-a"}, "", "{id: m}"), nil)
	be.script(t, fakellm.Script{Keys: map[string]fakellm.KeyScript{"key-a": {Mode: "rate-limited", For: fakellm.Duration(800 * time.Millisecond)}}})
	ctx := context.Background()
	done := make(chan served, 1)
	go func() { done <- chatSDK(ctx, g.URL, "oa/m", "hi") }() // exits when answered
	p := waitProvider(t, g, "oa", "the key cooling", func(p actors.ProviderState) bool { return len(p.Keys) == 1 && p.Keys[0].State == "cooling" })
	if ms := p.Keys[0].CooldownMs; ms > 800 {
		t.Errorf("cooldown %d ms: longer than the hint (800 ms)", ms)
	}
	s := <-done
	if s.err != nil || s.text != "served" || s.attempts() != "2" {
		t.Fatalf("call: %q %v, attempts %q; want served in 2 attempts", s.text, s.err, s.attempts())
	}
	seen := be.arrivals()
	if len(seen) != 2 {
		t.Fatalf("backend saw %d calls, want 2", len(seen))
	}
	hint := 800 * time.Millisecond
	if gap := seen[1].at.Sub(seen[0].at); gap < hint-20*time.Millisecond || gap > hint+400*time.Millisecond {
		t.Errorf("the key was probed again %v after its refusal; want at its hint, %v", gap, hint)
	}
	if k := providerOf(t, g, "oa").Keys[0]; k.State != "ready" || k.CooldownMs != 0 {
		t.Errorf("key after its cooldown: %+v; want ready (a cooldown never outlives its hint)", k)
	}
}

// TestAllKeysCooling: with every key resting, a call waits in the queue when the first key
// frees within its queue_timeout and is then served; when it would not, it is answered at
// once with 429 upstream_rate_limited and an honest Retry-After.
func TestAllKeysCooling(t *testing.T) {
	be := startRecorded(t, fakellm.Options{Reply: "served", Chunks: 1})
	cfg := "limits: {max_retry_wait: 100ms}\nproviders:\n" +
		keyedProvider("oa", "openai", be.URL, []string{"key-a", "key-b"}, "    queue_timeout: 1s\n", "{id: m}")
	g := startGateway(t, cfg, nil)
	rest := 3 * time.Second
	be.script(t, fakellm.Script{Keys: map[string]fakellm.KeyScript{
		"key-a": {Mode: "rate-limited", For: fakellm.Duration(rest)}, "key-b": {Mode: "rate-limited", For: fakellm.Duration(rest)}}})
	ctx := context.Background()

	// Both keys refuse: the retry that would wait for one passes max_retry_wait.
	s := chatSDK(ctx, g.URL, "oa/m", "hi")
	if e := s.apiError(); e == nil || e.StatusCode != 429 || e.Code != "upstream_rate_limited" || s.attempts() != "2" {
		t.Fatalf("first call: %v, attempts %q; want 429 upstream_rate_limited after both keys", s.err, s.attempts())
	}
	// The next would wait past its queue_timeout: answered at once, no attempt.
	s = chatSDK(ctx, g.URL, "oa/m", "hi")
	e := s.apiError()
	if e == nil || e.StatusCode != 429 || e.Code != "upstream_rate_limited" || s.attempts() != "0" {
		t.Fatalf("second call: %v, attempts %q; want an immediate 429 upstream_rate_limited", s.err, s.attempts())
	}
	if ra := s.header.Get("Retry-After"); ra != "3" && ra != "2" {
		t.Errorf("Retry-After %q: want the keys' remaining rest (2-3 s)", ra)
	}
	if !strings.Contains(e.Message, "every key") {
		t.Errorf("message %q does not say the keys are resting", e.Message)
	}
	// Once the first key frees within the queue_timeout, a call waits for it and is served.
	waitProvider(t, g, "oa", "a key close to ready", func(p actors.ProviderState) bool {
		return len(p.Keys) == 2 && p.Keys[0].CooldownMs > 0 && p.Keys[0].CooldownMs < 700
	})
	done := make(chan served, 1)
	go func() { done <- chatSDK(ctx, g.URL, "oa/m", "hi") }() // exits when answered
	waitProvider(t, g, "oa", "the call queued", func(p actors.ProviderState) bool { return p.Queued == 1 })
	s = <-done
	if s.err != nil || s.text != "served" || s.attempts() != "1" || s.header.Get("X-Gateway-Queue-Ms") == "0" {
		t.Fatalf("queued call: %q %v, attempts %q, queue %s ms; want served after waiting", s.text, s.err, s.attempts(), s.header.Get("X-Gateway-Queue-Ms"))
	}
	g.waitIdle(t)
}

// TestInvalidKeysSetAside: keys refused as invalid (401, and a 403 that refuses the key
// wherever it is used) are set aside; once all are, calls get 502 upstream_auth_failed at
// once, without retry advice, and the backend sees no more.
func TestInvalidKeysSetAside(t *testing.T) {
	be := startRecorded(t, fakellm.Options{Chunks: 1})
	be.script(t, fakellm.Script{Keys: map[string]fakellm.KeyScript{"bad-1": {Mode: "invalid"}, "bad-2": {Mode: "forbidden"}}})
	g := startGateway(t, "providers:\n"+keyedProvider("oa", "openai", be.URL, []string{"bad-1", "bad-2"}, "", "{id: m}"), nil)
	ctx := context.Background()
	for i, want := range []string{"2", "0"} {
		s := chatSDK(ctx, g.URL, "oa/m", "hi")
		e := s.apiError()
		if e == nil || e.StatusCode != 502 || e.Code != "upstream_auth_failed" || s.attempts() != want {
			t.Fatalf("call %d: %v, attempts %q; want 502 upstream_auth_failed after %s attempts", i, s.err, s.attempts(), want)
		}
		if s.header.Get("x-should-retry") != "false" || s.header.Get("Retry-After") != "" {
			t.Errorf("call %d: x-should-retry %q, Retry-After %q: waiting cannot fix it", i, s.header.Get("x-should-retry"), s.header.Get("Retry-After"))
		}
		if !strings.Contains(e.Message, "every key") {
			t.Errorf("call %d: message %q", i, e.Message)
		}
	}
	if n := len(be.arrivals()); n != 2 {
		t.Errorf("backend saw %d calls, want 2 (each key once)", n)
	}
	for _, k := range providerOf(t, g, "oa").Keys {
		if k.State != "set_aside" || k.SetAside == nil || k.SetAside.ReprobeInMs <= 0 {
			t.Errorf("key %d is %s (%+v), want set aside until its re-probe", k.Index, k.State, k.SetAside)
		}
	}
}

// TestFallbackChain: a model that is down falls back to the next in its list, which serves;
// X-Gateway-Model names it. A fallback's own fallbacks are not followed.
func TestFallbackChain(t *testing.T) {
	be := startRecorded(t, fakellm.Options{Reply: "served", Chunks: 1})
	be.script(t, fakellm.Script{Models: map[string]fakellm.ModelScript{"down-a": {Mode: "down"}, "down-b": {Mode: "down"}}})
	cfg := "providers:\n" +
		keyedProvider("one", "openai", be.URL, []string{"k1"}, noRetries,
			"{id: down-a, fallbacks: [two/good, three/spare]}", "{id: down-b, fallbacks: [one/down-a]}") +
		keyedProvider("two", "openai", be.URL, []string{"k2"}, "", "{id: good}") +
		keyedProvider("three", "openai", be.URL, []string{"k3"}, "", "{id: spare}")
	var logs syncBuffer
	g := startGatewayLogged(t, cfg, &logs)
	ctx := context.Background()

	s := chatSDK(ctx, g.URL, "one/down-a", "hi")
	if s.err != nil || s.text != "served" || s.model() != "two/good" || s.attempts() != "2" {
		t.Fatalf("call: %q %v, model %q, attempts %q; want two/good after one attempt on one/down-a", s.text, s.err, s.model(), s.attempts())
	}
	if !strings.Contains(logs.String(), `"fallbacks":["one/down-a"]`) || !strings.Contains(logs.String(), `"served_model":"two/good"`) {
		t.Errorf("the log line does not record the chain:\n%s", logs.String())
	}
	// down-b's fallback is down-a, whose own fallbacks are not followed: the call ends there.
	before := len(be.arrivals())
	s = chatSDK(ctx, g.URL, "one/down-b", "hi")
	if e := s.apiError(); e == nil || e.StatusCode != 503 || s.model() != "one/down-a" {
		t.Fatalf("down-b: %v, model %q; want 503 from one/down-a, its fallbacks not followed", s.err, s.model())
	}
	for _, a := range be.arrivals()[before:] {
		if a.model != "down-a" && a.model != "down-b" {
			t.Errorf("the backend saw %s: a fallback's fallbacks were followed", a.model)
		}
	}
}

// TestFallbackOnQueueFull: a model whose fallback_on names queue_full moves to its fallback
// when its queue is full; one whose fallback_on does not is answered 429.
func TestFallbackOnQueueFull(t *testing.T) {
	bs, held := heldSet("busy")
	cfg := `providers:
  - name: busy
    kind: fake
    lanes: 1
    queue_length: 0
    models:
      - {id: blocker}
      - {id: spills, fallbacks: [spare/m], fallback_on: [queue_full]}
      - {id: stays, fallbacks: [spare/m], fallback_on: [unavailable]}
  - name: spare
    kind: fake
    models: [{id: m, reply: "from the spare"}]
`
	g := startGateway(t, cfg, bs)
	ctx := context.Background()
	blocked := make(chan served, 1)
	go func() { blocked <- chatSDK(ctx, g.URL, "busy/blocker", "hi") }() // exits when released
	call := held.next(t)

	s := chatSDK(ctx, g.URL, "busy/spills", "hi")
	if s.err != nil || s.text != "from the spare" || s.model() != "spare/m" {
		t.Fatalf("spills: %q %v, model %q; want served by spare/m", s.text, s.err, s.model())
	}
	s = chatSDK(ctx, g.URL, "busy/stays", "hi")
	if e := s.apiError(); e == nil || e.StatusCode != 429 || e.Code != "provider_queue_full" || s.model() != "busy/stays" {
		t.Fatalf("stays: %v, model %q; want its own 429 provider_queue_full", s.err, s.model())
	}
	close(call.release)
	if s := <-blocked; s.err != nil {
		t.Fatal(s.err)
	}
	g.waitIdle(t)
}

// TestBreaker: consecutive provider-down answers open the circuit: calls get 503
// provider_unavailable with the time to the probe (or their fallback) without reaching the
// backend; after open_for one probe goes through while the others wait, and its success
// closes the circuit.
func TestBreaker(t *testing.T) {
	be := startRecorded(t, fakellm.Options{Reply: "served", Chunks: 1, Latency: 150 * time.Millisecond})
	be.script(t, fakellm.Script{Models: map[string]fakellm.ModelScript{"m": {Mode: "down"}}})
	cfg := "providers:\n" +
		keyedProvider("flaky", "openai", be.URL, []string{"k"}, "    retries: 0\n    breaker: {failures: 2, open_for: 1s}\n",
			"{id: m}", "{id: alt, fallbacks: [spare/m]}") +
		"  - {name: spare, kind: fake, models: [{id: m, reply: from the spare}]}\n"
	g := startGateway(t, cfg, nil)
	ctx := context.Background()
	for i := range 2 {
		if e := chatSDK(ctx, g.URL, "flaky/m", "hi").apiError(); e == nil || e.StatusCode != 503 {
			t.Fatalf("call %d: want the backend's 503, got %v", i, e)
		}
	}
	if b := providerOf(t, g, "flaky").Breaker; b == nil || b.State != "open" {
		t.Fatalf("breaker %+v after 2 failures, want open", b)
	}
	s := chatSDK(ctx, g.URL, "flaky/m", "hi")
	e := s.apiError()
	if e == nil || e.StatusCode != 503 || e.Code != "provider_unavailable" || s.attempts() != "0" || s.header.Get("Retry-After") != "1" ||
		!strings.Contains(e.Message, "circuit breaker") {
		t.Fatalf("while open: %v, attempts %q, Retry-After %q; want 503 at once with the time to the probe", s.err, s.attempts(), s.header.Get("Retry-After"))
	}
	if s := chatSDK(ctx, g.URL, "flaky/alt", "hi"); s.err != nil || s.model() != "spare/m" {
		t.Fatalf("alt while open: %v, model %q; want its fallback", s.err, s.model())
	}
	if n := len(be.arrivals()); n != 2 {
		t.Errorf("backend saw %d calls, want the 2 before the circuit opened", n)
	}
	be.script(t, fakellm.Script{}) // the backend recovers
	waitProvider(t, g, "flaky", "the probe due", func(p actors.ProviderState) bool { return p.Breaker.State == "half_open" })
	be.fake.ResetStats()
	var wg sync.WaitGroup
	results := make([]served, 2)
	for i := range results {
		wg.Go(func() { results[i] = chatSDK(ctx, g.URL, "flaky/m", "hi") }) // exits when answered
	}
	wg.Wait()
	for i, r := range results {
		if r.err != nil || r.text != "served" {
			t.Errorf("call %d after the probe: %v", i, r.err)
		}
	}
	if st := be.fake.Stats(); st.MaxConcurrent != 1 || st.Requests != 2 {
		t.Errorf("half-open: the backend saw %d calls, %d at once; want one probe, then the other", st.Requests, st.MaxConcurrent)
	}
	if b := providerOf(t, g, "flaky").Breaker; b.State != "closed" {
		t.Errorf("breaker %+v after the probe succeeded, want closed", b)
	}
}

// TestTPMLimit: with rate_limit tpm, calls wait for tokens (estimated before the call,
// corrected from usage) and the backend never sees more tokens than the bucket lets
// through: over any stretch, its capacity plus the rate times the stretch.
func TestTPMLimit(t *testing.T) {
	const tpm, completion = 6000, 100
	be := startRecorded(t, fakellm.Options{Chunks: completion})
	g := startGateway(t, "providers:\n"+keyedProvider("oa", "openai", be.URL, []string{"k"}, "    lanes: 16\n    model_lanes: 16\n    queue_length: 16\n    rate_limit: {tpm: 6000}\n", "{id: m}"), nil)
	ctx := context.Background()
	const n = 12
	results := make([]served, n)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() { // exits when answered
			results[i] = chatSDK(ctx, g.URL, "oa/m", "hi", option.WithJSONSet("max_tokens", completion))
		})
	}
	wg.Wait()
	waited := 0
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("call %d: %v", i, r.err)
		}
		if q := r.header.Get("X-Gateway-Queue-Ms"); q != "0" && q != "" {
			waited++
		}
	}
	if waited < 2 {
		t.Errorf("%d calls waited for tokens; the bucket (1000 tokens) holds 9 calls of ~106", waited)
	}
	// Each call used 1 prompt word and 100 completion tokens (fakellm's count).
	seen := be.arrivals()
	rate := float64(tpm) / float64(time.Minute)
	capacity := float64(tpm / 6)
	slack := 50 * time.Millisecond // the time between the gateway's start and the backend's arrival
	for i := range seen {
		for j := i; j < len(seen); j++ {
			used := float64(j-i+1) * (completion + 1)
			if allowed := capacity + rate*float64(seen[j].at.Sub(seen[i].at)+slack); used > allowed {
				t.Fatalf("calls %d..%d: %v tokens within %v; the bucket allows %v", i, j, used, seen[j].at.Sub(seen[i].at), allowed)
			}
		}
	}
	if lv := providerOf(t, g, "oa").RateLimit; lv == nil || lv.TPMCapacity != 1000 {
		t.Errorf("rate_limit in /admin/state %+v: want the tpm bucket's level and capacity 1000", lv)
	}
}

// TestLimiterHeldIsToldSo: a request held back by the rate limiter, not by lanes, is told
// which limit and when it will have room; the burst is configurable.
func TestLimiterHeldIsToldSo(t *testing.T) {
	cfg := `providers:
  - name: slow
    kind: fake
    queue_length: 0
    rate_limit: {rpm: 6}
    models: [{id: m}]
  - name: timed
    kind: fake
    queue_length: 4
    queue_timeout: 1s
    rate_limit: {rpm: 6}
    models: [{id: m}]
  - name: bursty
    kind: fake
    rate_limit: {rpm: 60, burst: 3}
    models: [{id: m}]
`
	g := startGateway(t, cfg, nil)
	ctx := context.Background()
	if s := chatSDK(ctx, g.URL, "slow/m", "hi"); s.err != nil {
		t.Fatal(s.err)
	}
	s := chatSDK(ctx, g.URL, "slow/m", "hi")
	e := s.apiError()
	if e == nil || e.Code != "provider_queue_full" || !strings.Contains(e.Message, "rate limit (rpm 6)") {
		t.Fatalf("idle provider behind its rpm: %v; want provider_queue_full naming the rate limit", s.err)
	}
	if ra := s.header.Get("Retry-After"); ra != "10" && ra != "9" {
		t.Errorf("Retry-After %q, want the next token (10 s)", ra)
	}
	// Two queue timeouts in a row: each is told when the next token comes, sooner the later.
	if s := chatSDK(ctx, g.URL, "timed/m", "hi"); s.err != nil {
		t.Fatal(s.err)
	}
	var prev int
	for i := range 2 {
		s := chatSDK(ctx, g.URL, "timed/m", "hi")
		e := s.apiError()
		if e == nil || e.Code != "provider_queue_timeout" || !strings.Contains(e.Message, "rpm 6") {
			t.Fatalf("timeout %d: %v; want provider_queue_timeout naming the rate limit", i, s.err)
		}
		var ra int
		fmt.Sscan(s.header.Get("Retry-After"), &ra)
		if ra < 1 || ra > 10 || i > 0 && ra > prev {
			t.Errorf("timeout %d: Retry-After %d after %d: want the time to the next token, never growing", i, ra, prev)
		}
		prev = ra
	}
	// burst 3: three back to back, the fourth after a second.
	start := time.Now()
	for i := range 4 {
		if s := chatSDK(ctx, g.URL, "bursty/m", "hi"); s.err != nil {
			t.Fatalf("bursty %d: %v", i, s.err)
		}
		if i == 2 && time.Since(start) > 800*time.Millisecond {
			t.Errorf("the burst of 3 took %v", time.Since(start))
		}
	}
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Errorf("the fourth call came after %v; rpm 60 with burst 3 allows it only after ~1s", d)
	}
}

// TestRouteByTask: a route sends a short prompt to the cheap model and a long one to the big
// model; a task header picks its own rule; /v1/models lists the route and its candidates.
func TestRouteByTask(t *testing.T) {
	cfg := `providers:
  - name: cheap
    kind: fake
    models: [{id: m, reply: cheap}]
  - name: big
    kind: fake
    models: [{id: m, reply: big}]
routes:
  - name: support
    rules:
      - when: {task: review}
        model: big/m
      - when: {max_prompt_tokens: 50}
        model: cheap/m
      - model: big/m
`
	g := startGateway(t, cfg, nil)
	ctx := context.Background()
	for _, c := range []struct {
		prompt, task, want string
	}{
		{"a short question", "", "cheap/m"},
		{strings.Repeat("a long question with a lot of context ", 20), "", "big/m"},
		{"short, but a review", "review", "big/m"},
	} {
		var opts []option.RequestOption
		if c.task != "" {
			opts = append(opts, option.WithHeader("X-Gateway-Task", c.task))
		}
		s := chatSDK(ctx, g.URL, "support", c.prompt, opts...)
		if s.err != nil || s.model() != c.want || s.text != strings.TrimSuffix(c.want, "/m") {
			t.Errorf("prompt of %d bytes, task %q: %q %v from %q; want %s", len(c.prompt), c.task, s.text, s.err, s.model(), c.want)
		}
	}
	var list struct {
		Data []struct {
			ID   string `json:"id"`
			Spec struct {
				Route      bool     `json:"route"`
				Candidates []string `json:"candidates"`
			} `json:"spec"`
		} `json:"data"`
	}
	res, err := rawClient.Get(g.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range list.Data {
		if m.ID == "support" {
			found = m.Spec.Route && strings.Join(m.Spec.Candidates, " ") == "big/m cheap/m"
		} else if m.Spec.Route {
			t.Errorf("%s is marked a route", m.ID)
		}
	}
	if !found {
		t.Errorf("/v1/models lacks the route with its candidates: %+v", list.Data)
	}
}

// TestForbiddenModelSetAsideCounted: a 403 for one model sets aside the key for that model
// alone (SPEC §10): the provider's other model is served on the same key, /admin/state
// names the model and when the pair is re-probed, and /metrics counts the set-aside by its
// scope, the restorations' series at 0 from the start.
func TestForbiddenModelSetAsideCounted(t *testing.T) {
	be := startRecorded(t, fakellm.Options{Chunks: 1})
	be.script(t, fakellm.Script{Models: map[string]fakellm.ModelScript{"denied": {Mode: "forbidden"}}})
	g := startGateway(t, "providers:\n"+keyedProvider("oa", "openai", be.URL, []string{"only-key"}, "", "{id: allowed}", "{id: denied}"), nil)
	ctx := context.Background()
	for i, c := range []struct{ model, code string }{{"denied", "upstream_auth_failed"}, {"allowed", ""}, {"denied", "upstream_auth_failed"}, {"allowed", ""}} {
		s := chatSDK(ctx, g.URL, "oa/"+c.model, "hi")
		if e := s.apiError(); c.code == "" && s.err != nil || c.code != "" && (e == nil || e.StatusCode != 502 || e.Code != c.code) {
			t.Fatalf("call %d to %s: %v, want %s", i, c.model, s.err, map[bool]string{true: "served", false: "502 " + c.code}[c.code == ""])
		}
	}
	if n := len(be.arrivals()); n != 3 {
		t.Errorf("backend saw %d calls, want 3 (the refused model once)", n)
	}
	g.waitIdle(t)
	k := providerOf(t, g, "oa").Keys[0]
	if k.State != "ready" || len(k.Models) != 1 || k.Models[0].Name != "oa/denied" || k.Models[0].ReprobeInMs <= 0 ||
		!strings.Contains(k.Models[0].Reason, "403") {
		t.Errorf("key 0 in /admin/state: %+v, want ready, set aside for oa/denied with its reason and re-probe time", k)
	}
	fams := scrape(t, g.URL, "")
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"tollgate_keys_set_aside_total", []string{"provider=oa", "scope=model"}, 1},
		{"tollgate_keys_set_aside_total", []string{"provider=oa", "scope=key"}, 0},
		{"tollgate_keys_restored_total", []string{"by=probe", "provider=oa", "scope=model"}, 0},
		{"tollgate_keys_restored_total", []string{"by=reload", "provider=oa", "scope=key"}, 0},
	} {
		if got := value(t, fams, c.name, c.labels...); got != c.want {
			t.Errorf("%s{%s} = %v, want %v", c.name, strings.Join(c.labels, ","), got, c.want)
		}
	}
}
