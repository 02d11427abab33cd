package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/cmd/internal/fakellm"
)

// secretMark is in every backend key of this file and in nothing else: finding it anywhere
// the gateway writes (a response, a header, a log line) is a leaked key, whole or in part.
const secretMark = "tollgate-secret"

func providerKey(provider string) string { return "sk-" + secretMark + "-XYZ-" + provider }
func modelKey(provider, model string) string {
	return "sk-" + secretMark + "-model-" + provider + "-" + model
}

// The echo backend's scenarios, chosen by model name. Each failure puts the credential it
// received into its message, its body and a response header, as careless backends do.
var echoModels = []string{"echo-401", "echo-400", "echo-429", "echo-500", "echo-garbage", "echo-stream"}

// keyedModels get a key of their own (per-model keys, as NVIDIA issues them). echo-401 has
// one so that setting its refused key aside leaves its provider's other models their key.
var keyedModels = map[string]bool{"echo-400": true, "echo-401": true, "echo-stream": true, "quirk-rate-limit": true,
	"quirk-error-midstream": true, "quirk-reasoning": true, "quirk-error-200-dashscope": true}

// syncBuffer is a log sink written by many goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startGatewayLogged is startGateway with the gateway's logs (start-up included) going to w.
func startGatewayLogged(t *testing.T, yaml string, w io.Writer) *gateway {
	t.Helper()
	return serveGateway(t, yaml, nil, zerolog.New(w).Level(zerolog.TraceLevel))
}

// keySeen records every credential the backends received, so the test knows the keys it
// looks for really went out (a key never sent cannot leak, and the test would prove nothing).
type keySeen struct {
	mu   sync.Mutex
	keys map[string]bool
}

func (k *keySeen) record(r *http.Request) string {
	var got []string
	for _, h := range []string{"Authorization", "X-Api-Key", "X-Goog-Api-Key"} {
		if v := r.Header.Get(h); v != "" {
			got = append(got, v)
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, v := range got {
		k.keys[strings.TrimPrefix(v, "Bearer ")] = true
	}
	return strings.Join(got, " ")
}

func (k *keySeen) has(key string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.keys[key]
}

// echoBackend answers every API family's endpoints with failures that quote the credential.
func echoBackend(seen *keySeen) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cred := seen.record(r)
		body, _ := io.ReadAll(r.Body)
		family := "openai"
		switch {
		case strings.Contains(r.URL.Path, "/messages"), r.Header.Get("anthropic-version") != "":
			family = "anthropic"
		case strings.Contains(r.URL.Path, "/v1beta"):
			family = "gemini"
		}
		w.Header().Set("X-Echo-Key", cred)
		msg := "Incorrect API key provided: " + cred + ". You can find your API key at your dashboard."
		target := r.URL.Path + " " + string(body)
		switch {
		case strings.Contains(target, "echo-garbage"):
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, "<html><body>proxy error for %s</body></html>", cred)
		case strings.Contains(target, "echo-stream") && bytes.Contains(body, []byte(`"stream":true`)) ||
			strings.Contains(target, "echo-stream") && strings.Contains(r.URL.Path, "streamGenerateContent"):
			echoStream(w, family, msg)
		case strings.Contains(target, "echo-400"):
			echoError(w, family, 400, msg)
		case strings.Contains(target, "echo-429"):
			w.Header().Set("Retry-After", "3")
			echoError(w, family, 429, msg)
		case strings.Contains(target, "echo-500"), strings.Contains(target, "echo-stream"):
			echoError(w, family, 500, msg)
		default: // echo-401 and model listings
			echoError(w, family, 401, msg)
		}
	})
}

func echoError(w http.ResponseWriter, family string, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	q := fmt.Sprintf("%q", msg)
	switch family {
	case "anthropic":
		typ := map[int]string{400: "invalid_request_error", 401: "authentication_error", 429: "rate_limit_error"}[status]
		if typ == "" {
			typ = "api_error"
		}
		fmt.Fprintf(w, `{"type":"error","error":{"type":%q,"message":%s}}`, typ, q)
	case "gemini":
		st := map[int]string{400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 429: "RESOURCE_EXHAUSTED"}[status]
		if st == "" {
			st = "INTERNAL"
		}
		fmt.Fprintf(w, `{"error":{"code":%d,"message":%s,"status":%q}}`, status, q, st)
	default:
		code := map[int]string{401: "invalid_api_key", 429: "rate_limit_exceeded"}[status]
		fmt.Fprintf(w, `{"error":{"message":%s,"type":"invalid_request_error","param":null,"code":%q}}`, q, code)
	}
}

// echoStream sends one content chunk, then an in-stream error quoting the credential.
func echoStream(w http.ResponseWriter, family, msg string) {
	w.Header().Set("Content-Type", "text/event-stream")
	q := fmt.Sprintf("%q", msg)
	switch family {
	case "anthropic":
		fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"echo-stream\",\"usage\":{\"input_tokens\":1,\"output_tokens\":0}}}\n\n")
		fmt.Fprint(w, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
		fmt.Fprint(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n")
		fmt.Fprintf(w, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":%s}}\n\n", q)
	case "gemini":
		fmt.Fprint(w, "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Hi\"}],\"role\":\"model\"},\"index\":0}]}\n\n")
		fmt.Fprintf(w, "data: {\"error\":{\"code\":500,\"message\":%s,\"status\":\"INTERNAL\"}}\n\n", q)
	default:
		fmt.Fprintf(w, "data: %s\n\n", chunkJSON("Hi"))
		fmt.Fprintf(w, "data: {\"error\":{\"message\":%s,\"type\":\"server_error\",\"param\":null,\"code\":null}}\n\n", q)
	}
}

// secretsConfig: the quirk providers against fakellm, three echo providers (one per family)
// and three providers whose start-up model listing the echo backend refuses.
func secretsConfig(fakeURL, echoURL string) (yaml string, keys []string) {
	var b strings.Builder
	b.WriteString("providers:\n")
	provider := func(name, kind, base string, runTimeout string, models []string) {
		keys = append(keys, providerKey(name))
		fmt.Fprintf(&b, "  - name: %s\n    kind: %s\n    base_url: %s\n    keys: [%q]\n%s", name, kind, base, providerKey(name), noResilience)
		if runTimeout != "" {
			fmt.Fprintf(&b, "    run_timeout: %s\n", runTimeout)
		}
		if len(models) == 0 {
			return
		}
		b.WriteString("    models:\n")
		for _, m := range models {
			fmt.Fprintf(&b, "      - id: %s\n", m)
			if keyedModels[m] {
				keys = append(keys, modelKey(name, m))
				fmt.Fprintf(&b, "        keys: [%q]\n", modelKey(name, m))
			}
		}
	}
	models := map[string][]string{}
	for _, c := range quirkCases() {
		if len(models[c.provider]) == 0 { // a plain success with the provider's own key
			models[c.provider] = []string{"fake-model"}
		}
		models[c.provider] = append(models[c.provider], "quirk-"+c.mode)
	}
	names := make([]string, 0, len(models))
	for n := range models {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := quirkProviders[n]
		provider(n, p.kind, fakeURL+p.path, p.runTimeout, models[n])
	}
	for _, f := range []struct{ kind, path string }{{"openai", "/v1"}, {"anthropic", ""}, {"gemini", "/v1beta"}} {
		provider("echo-"+f.kind, f.kind, echoURL+f.path, "", echoModels)
		provider("list-"+f.kind, f.kind, echoURL+f.path, "", nil)
	}
	return b.String(), keys
}

// exchange is one request's whole answer as a client could see it.
func exchange(t *testing.T, method, url, body string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	res, err := rawClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: reading: %v", method, url, err)
	}
	var all strings.Builder
	fmt.Fprintf(&all, "%s\n", res.Status)
	for k, vs := range res.Header {
		fmt.Fprintf(&all, "%s: %s\n", k, strings.Join(vs, ", "))
	}
	all.Write(b)
	return all.String()
}

// TestNoBackendKeyLeaks drives successes and every failure through the gateway and fails if
// any backend key shows up in a response (status, headers, body), /v1/models, /admin/state
// or the gateway's logs.
func TestNoBackendKeyLeaks(t *testing.T) {
	seen := &keySeen{keys: map[string]bool{}}
	fk := fakellm.New(fakellm.Options{Reply: quirkReply, Chunks: quirkChunks})
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.record(r)
		fk.ServeHTTP(w, r)
	}))
	t.Cleanup(fake.Close)
	echo := httptest.NewServer(echoBackend(seen))
	t.Cleanup(echo.Close)
	yaml, keys := secretsConfig(fake.URL, echo.URL)
	var logs syncBuffer
	g := startGatewayLogged(t, yaml, &logs)

	var answers []string
	chat := func(model string, stream bool) string {
		a := exchange(t, "POST", g.URL+"/v1/chat/completions",
			fmt.Sprintf(`{"model":%q,"stream":%v,"messages":[{"role":"user","content":"hi"}]}`, model, stream))
		answers = append(answers, model+"\n"+a)
		return a
	}
	for _, c := range quirkCases() {
		for _, stream := range []bool{false, true} {
			chat(c.model(), stream)
			chat(c.provider+"/fake-model", stream)
		}
	}
	for _, f := range []string{"openai", "anthropic", "gemini"} {
		for _, m := range echoModels {
			for _, stream := range []bool{false, true} {
				a := chat("echo-"+f+"/"+m, stream)
				// The backend's message reaches the client; only the key is cut out of it.
				if m != "echo-garbage" && !strings.Contains(a, "Incorrect API key provided") {
					t.Errorf("echo-%s/%s stream=%v: the backend's message was not relayed:\n%s", f, m, stream, a)
				}
			}
		}
	}
	g.waitIdle(t)
	for _, path := range []string{"/v1/models", "/v1/models/echo-openai/echo-400", "/v1/models/openai/quirk-rate-limit",
		"/admin/state", "/healthz", "/readyz"} {
		a := exchange(t, "GET", g.URL+path, "")
		if !strings.HasPrefix(a, "200 ") {
			t.Errorf("GET %s: %s", path, a)
		}
		answers = append(answers, path+"\n"+a)
	}

	for _, k := range keys {
		if !seen.has(k) {
			t.Errorf("key %s never reached a backend: the test cannot see it leak", k)
		}
	}
	for _, a := range answers {
		if strings.Contains(a, secretMark) {
			t.Errorf("a backend key leaked to a client:\n%s", a)
		}
	}
	if strings.Contains(logs.String(), secretMark) {
		t.Errorf("a backend key leaked to the logs:\n%s", logs.String())
	}
	if testing.Verbose() {
		t.Log(logs.String())
	}
	if !strings.Contains(logs.String(), `"message":"chat"`) || !strings.Contains(logs.String(), "could not list") {
		t.Errorf("the logs lack the chat lines or the listing failures, so the check saw nothing:\n%s", logs.String())
	}
}
