package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate/tollgate/cmd/internal/app"
	"github.com/tollgate/tollgate/cmd/internal/telemetry"
)

const (
	clientTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpanID  = "00f067aa0ba902b7"
	tracedPrompt  = "the secret plan is PROMPT-TEXT-42"
)

// tracedBackend is an OpenAI-compatible backend on loopback that keeps the traceparent of
// every chat call it answers.
type tracedBackend struct {
	*httptest.Server
	mu      sync.Mutex
	parents []string
}

func newTracedBackend(t *testing.T) *tracedBackend {
	b := &tracedBackend{}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if !strings.HasSuffix(r.URL.Path, "/chat/completions") {
			http.NotFound(w, r) // the model list: the configured models serve
			return
		}
		b.mu.Lock()
		b.parents = append(b.parents, r.Header.Get("traceparent"))
		b.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s\n\n", chunkJSON("traced"))
		fmt.Fprint(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}`+"\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(b.Close)
	return b
}

func (b *tracedBackend) traceparents() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.parents...)
}

// useW3C installs the propagator tracing installs when it is on, for this test.
func useW3C(t *testing.T) {
	prev := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTextMapPropagator(prev) })
}

func tracedChat(t *testing.T, url string, stream bool) {
	t.Helper()
	tracedChatFlags(t, url, stream, "01")
}

// tracedChatFlags is tracedChat with the traceparent's trace flags: "01" sampled, "00" not.
func tracedChatFlags(t *testing.T, url string, stream bool, flags string) {
	t.Helper()
	body := fmt.Sprintf(`{"model":"up/m","stream":%v,"max_tokens":64,"temperature":0.5,"messages":[{"role":"user","content":%q}]}`, stream, tracedPrompt)
	req, _ := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("traceparent", "00-"+clientTraceID+"-"+clientSpanID+"-"+flags)
	res, err := rawClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(b), "traced") {
		t.Fatalf("answer %d: %s", res.StatusCode, b)
	}
}

// TestTraceSpans checks the span tree, its GenAI attributes and the traceparent in (from the
// client) and out (to an HTTP backend), with the SDK's in-memory exporter.
func TestTraceSpans(t *testing.T) {
	useW3C(t)
	for _, content := range []bool{false, true} {
		t.Run(fmt.Sprintf("content=%v", content), func(t *testing.T) {
			exp := tracetest.NewInMemoryExporter()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
			t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			be := newTracedBackend(t)
			g := serveApp(t, upstreamConfig(be.URL), app.Options{Logger: zerolog.Nop(), Tracer: tp.Tracer("test"), TraceContent: content})
			tracedChat(t, g.URL, true)
			g.waitIdle(t)
			spans := waitSpans(t, exp, 3)

			byName := map[string]tracetest.SpanStub{}
			for _, s := range spans {
				byName[s.Name] = s
			}
			root, queue, attempt := byName["chat up/m"], byName["queue"], byName["chat m"]
			if root.Name == "" || queue.Name == "" || attempt.Name == "" {
				t.Fatalf("spans %v, want chat up/m, queue, chat m", names(spans))
			}
			if root.SpanContext.TraceID().String() != clientTraceID || root.Parent.SpanID().String() != clientSpanID ||
				!root.Parent.IsRemote() || root.SpanKind != trace.SpanKindServer {
				t.Errorf("root: trace %s parent %s (remote %v) kind %v; want the client's trace and span, server kind",
					root.SpanContext.TraceID(), root.Parent.SpanID(), root.Parent.IsRemote(), root.SpanKind)
			}
			for _, child := range []tracetest.SpanStub{queue, attempt} {
				if child.Parent.SpanID() != root.SpanContext.SpanID() || child.SpanContext.TraceID() != root.SpanContext.TraceID() {
					t.Errorf("%s is not a child of the request's span", child.Name)
				}
			}
			if attempt.SpanKind != trace.SpanKindClient {
				t.Errorf("attempt kind %v", attempt.SpanKind)
			}
			if queue.StartTime.Before(root.StartTime) || queue.EndTime.After(attempt.EndTime) || attempt.EndTime.After(root.EndTime) {
				t.Errorf("times: root %v–%v, queue %v–%v, attempt %v–%v", root.StartTime, root.EndTime,
					queue.StartTime, queue.EndTime, attempt.StartTime, attempt.EndTime)
			}
			wantAttrs(t, root, map[string]string{"gen_ai.operation.name": "chat", "gen_ai.request.model": "up/m",
				"gen_ai.response.model": "up/m", "gen_ai.usage.input_tokens": "7", "gen_ai.usage.output_tokens": "3",
				"gen_ai.request.max_tokens": "64", "gen_ai.request.temperature": "0.5", "http.response.status_code": "200",
				"http.route": "/v1/chat/completions", "tollgate.provider": "up", "tollgate.attempts": "1"})
			wantAttrs(t, attempt, map[string]string{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
				"gen_ai.request.model": "m", "gen_ai.usage.input_tokens": "7", "gen_ai.usage.output_tokens": "3",
				"gen_ai.response.finish_reasons": `["stop"]`, "tollgate.provider": "up"})
			wantAttrs(t, queue, map[string]string{"tollgate.provider": "up", "gen_ai.request.model": "up/m"})

			// The backend's traceparent continues the trace, with the attempt as parent.
			parents := be.traceparents()
			want := "00-" + clientTraceID + "-" + attempt.SpanContext.SpanID().String() + "-01"
			if len(parents) != 1 || parents[0] != want {
				t.Errorf("backend saw traceparent %q, want %q", parents, want)
			}

			inSpans := false
			for _, s := range spans {
				for _, a := range s.Attributes {
					inSpans = inSpans || strings.Contains(a.Value.Emit(), "PROMPT-TEXT-42")
				}
			}
			if inSpans != content {
				t.Errorf("prompt in spans: %v, want %v (TraceContent)", inSpans, content)
			}
			if content {
				wantAttrs(t, root, map[string]string{"gen_ai.input.messages": `[{"role":"user","parts":[{"type":"text","content":"` + tracedPrompt + `"}]}]`})
			}
		})
	}
}

// TestTraceSampledOut: a client's traceparent that says "not sampled" is honoured by the
// default sampler (parent-based): no span is recorded, and the backend still gets the trace,
// unsampled, with the request's span as its parent.
func TestTraceSampledOut(t *testing.T) {
	useW3C(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	be := newTracedBackend(t)
	g := serveApp(t, upstreamConfig(be.URL), app.Options{Logger: zerolog.Nop(), Tracer: tp.Tracer("test")})
	tracedChatFlags(t, g.URL, true, "00")
	g.waitIdle(t)
	if spans := exp.GetSpans(); len(spans) != 0 {
		t.Errorf("spans of a sampled-out request: %v", names(spans))
	}
	parents := be.traceparents()
	if len(parents) != 1 {
		t.Fatalf("backend saw traceparents %q, want 1", parents)
	}
	parts := strings.Split(parents[0], "-")
	if len(parts) != 4 || parts[1] != clientTraceID || len(parts[2]) != 16 || parts[2] == clientSpanID || parts[3] != "00" {
		t.Errorf("backend saw traceparent %q, want the client's trace, a span of the gateway's, not sampled", parents[0])
	}
}

// TestTraceRejected: a request turned away by admission still has its span tree, with the
// SPEC §4 code as error.type, and no backend attempt.
func TestTraceRejected(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	bs, held := heldSet("p")
	g := serveApp(t, strings.Replace(oneLane, "queue_length: 1", "queue_length: 0", 1),
		app.Options{Logger: zerolog.Nop(), Backends: bs, Tracer: tp.Tracer("test")})
	running := postAsync(context.Background(), g.URL, "p/m", "", false)
	c := held.next(t)
	checkBusy(t, post(context.Background(), g.URL, "p/m", "", false), "provider_queue_full")
	close(c.release)
	await(t, running)
	g.waitIdle(t)
	var rejected []tracetest.SpanStub
	for _, s := range waitSpans(t, exp, 5) { // 2 roots, 2 queues, 1 attempt
		for _, a := range s.Attributes {
			if string(a.Key) == "error.type" && a.Value.Emit() == "provider_queue_full" {
				rejected = append(rejected, s)
			}
		}
	}
	if len(rejected) != 2 { // the request's span and its queue span
		t.Errorf("spans with error.type provider_queue_full: %v", names(rejected))
	}
}

func waitSpans(t *testing.T, exp *tracetest.InMemoryExporter, n int) tracetest.SpanStubs {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		spans := exp.GetSpans()
		if len(spans) >= n {
			if len(spans) > n {
				t.Errorf("%d spans, want %d: %v", len(spans), n, names(spans))
			}
			return spans
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d spans after 5s, want %d: %v", len(spans), n, names(spans))
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
}

func names(spans []tracetest.SpanStub) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

func wantAttrs(t *testing.T, s tracetest.SpanStub, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	for _, a := range s.Attributes {
		got[string(a.Key)] = a.Value.Emit()
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("span %q: %s = %q, want %q (all: %v)", s.Name, k, got[k], v, got)
		}
	}
}

// TestTracesOverOTLP exports through the real OTLP/HTTP exporter, configured by the standard
// environment variables, to a receiver in this process that decodes the protobuf.
func TestTracesOverOTLP(t *testing.T) {
	var mu sync.Mutex
	var got []*coltracepb.ExportTraceServiceRequest
	var paths []string
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		req := &coltracepb.ExportTraceServiceRequest{}
		if err := proto.Unmarshal(b, req); err != nil || r.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("receiver: %s %v", r.Header.Get("Content-Type"), err)
		}
		mu.Lock()
		got, paths = append(got, req), append(paths, r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Write(out)
	}))
	defer recv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", recv.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer otlp-secret-header")
	t.Setenv("OTEL_SERVICE_NAME", "tollgate-test")
	prev := otel.GetTextMapPropagator()
	t.Cleanup(func() { otel.SetTextMapPropagator(prev) })

	tr, err := telemetry.NewTracing(context.Background(), os.LookupEnv, "v0-test")
	if err != nil {
		t.Fatal(err)
	}
	if tr.Tracer == nil || !strings.Contains(tr.Summary, "OTLP/HTTP to "+recv.URL) || strings.Contains(tr.Summary, "otlp-secret") {
		t.Fatalf("tracing %+v", tr)
	}
	be := newTracedBackend(t)
	g := serveApp(t, upstreamConfig(be.URL), app.Options{Logger: zerolog.Nop(), Tracer: tr.Tracer})
	tracedChat(t, g.URL, true)
	g.waitIdle(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil { // flushes the batch
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	spans := map[string]string{} // name → trace id
	service := ""
	for _, req := range got {
		for _, rs := range req.GetResourceSpans() {
			for _, a := range rs.GetResource().GetAttributes() {
				if a.GetKey() == "service.name" {
					service = a.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					spans[s.GetName()] = fmt.Sprintf("%x", s.GetTraceId())
				}
			}
		}
	}
	if len(paths) == 0 || paths[0] != "/v1/traces" {
		t.Errorf("receiver paths %v, want /v1/traces", paths)
	}
	for _, name := range []string{"chat up/m", "queue", "chat m"} {
		if spans[name] != clientTraceID {
			t.Errorf("span %q: trace %q, want the client's %s (got %v)", name, spans[name], clientTraceID, spans)
		}
	}
	if service != "tollgate-test" {
		t.Errorf("service.name %q, want OTEL_SERVICE_NAME's", service)
	}
}
