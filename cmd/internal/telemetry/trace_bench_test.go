package telemetry_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/cmd/internal/app"
	"github.com/tollgate/tollgate/cmd/internal/config"
	"github.com/tollgate/tollgate/cmd/internal/fakellm"
	"github.com/tollgate/tollgate/cmd/internal/telemetry"
)

// BenchmarkRequest is what one request costs with telemetry off and on, through a whole
// in-process gateway (app.New, served on loopback) relaying to an in-process fakellm, as the
// relay benchmark runs it (docs/benchmarks.md) but without its noise. The modes:
//
//   - off: counts nothing, traces nothing (the relay benchmark's "off");
//   - metrics: counts every request (the SPEC §15 series), traces nothing;
//   - on: counts, records every span (sampler always_on) and exports it over OTLP/HTTP to a
//     receiver in this process;
//   - unsampled: "on" with a sampler that keeps no request (always_off): what each request a
//     ratio sampler leaves out costs.
//
// Requests go one at a time (c=1) or 50 at a time (c=50), with the gateway binaries'
// collector settings (app.TuneGC). Besides ns/op and allocs/op (exact, and the figure to
// compare on a shared machine) it reports cpu-µs/op: the process's user+sys CPU over the
// requests, client, gateway, backend and receiver together, the last batch's export included.
//
//	go test -run '^$' -bench BenchmarkRequest -benchmem ./cmd/internal/telemetry/
func BenchmarkRequest(b *testing.B) {
	app.TuneGC()
	backend := httptest.NewServer(fakellm.New(fakellm.Options{}))
	b.Cleanup(backend.Close)
	recv := startReceiver(b)
	for _, stream := range []bool{false, true} {
		for _, conc := range []int{1, 50} {
			for _, mode := range []string{"off", "metrics", "on", "unsampled"} {
				name := fmt.Sprintf("%s/c=%d/%s", map[bool]string{false: "whole", true: "stream"}[stream], conc, mode)
				b.Run(name, func(b *testing.B) {
					before := recv.exports.Load()
					benchRequests(b, backend.URL, recv.URL, stream, conc, mode)
					if mode == "on" && recv.exports.Load() == before {
						b.Fatal("tracing on, but no span reached the receiver")
					}
				})
			}
		}
	}
}

// benchRequests serves a gateway relaying to backendURL as mode says, tracing to otlpURL, and
// sends it b.N chat requests, conc at a time.
func benchRequests(b *testing.B, backendURL, otlpURL string, stream bool, conc int, mode string) {
	tracing := mode == "on" || mode == "unsampled"
	b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlpURL)
	b.Setenv("OTEL_TRACES_SAMPLER", map[bool]string{false: "always_off", true: "always_on"}[mode == "on"])
	b.Setenv("OTEL_SDK_DISABLED", map[bool]string{false: "true", true: "false"}[tracing])
	// NewTracing installs W3C's propagator when on; the next run starts without it, as off.
	b.Cleanup(func() { otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator()) })
	tr, err := telemetry.NewTracing(context.Background(), os.LookupEnv, "bench")
	if err != nil {
		b.Fatal(err)
	}
	url := serveBench(b, backendURL, app.Options{Logger: zerolog.Nop(), Tracer: tr.Tracer, NoMetrics: mode == "off"})
	body := benchBody
	if stream {
		body = bytes.Replace(body, []byte(`"stream":false`), []byte(`"stream":true`), 1)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: conc}}
	defer client.CloseIdleConnections()
	send := func() error {
		res, err := client.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			return err
		}
		n, _ := io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || n < 200 {
			return fmt.Errorf("answer %d, %d bytes", res.StatusCode, n)
		}
		return nil
	}
	if err := sendAll(100, conc, send); err != nil { // warm the connections and the pools up
		b.Fatal(err)
	}
	cpu0 := cpuTime(b)
	b.ReportAllocs()
	b.ResetTimer()
	if err := sendAll(b.N, conc, send); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil { // the last batch's export is part of the cost
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}

// receiver is an OTLP/HTTP receiver in the benchmark's process that reads each export and
// acknowledges it, as the relay benchmark's does.
type receiver struct {
	URL            string
	exports, bytes atomic.Int64
}

func startReceiver(b *testing.B) *receiver {
	r := &receiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		n, _ := io.Copy(io.Discard, req.Body)
		r.exports.Add(1)
		r.bytes.Add(n)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK) // an empty ExportTraceServiceResponse: all accepted
	}))
	b.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

// benchBody is the chat request the benchmarks send, the relay benchmark's.
var benchBody = []byte(`{"model":"bench/fake-model","stream":false,"messages":[{"role":"user","content":"Say hello in twenty words."}]}`)

// serveBench serves, until the benchmark's end, a gateway with the relay benchmark's
// configuration relaying to backendURL, and returns its chat completions URL.
func serveBench(b *testing.B, backendURL string, o app.Options) string {
	cfg, err := config.Parse("bench.yaml", []byte(`
limits: {max_running: 64, max_admitted: 256, queue_length: 64}
providers:
  - name: bench
    kind: openai
    base_url: `+backendURL+`/v1
    keys: [x]
    lanes: 64
    model_lanes: 64
    refresh_models: 0s
    models:
      - id: fake-model
`), func(string) (string, bool) { return "", false })
	if err != nil {
		b.Fatal(err)
	}
	a, err := app.New(context.Background(), cfg, o)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := a.Server()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }() // exits when the cleanup closes srv
	b.Cleanup(func() {
		_ = srv.Close()
		<-served
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = a.Drain(ctx)
	})
	return "http://" + ln.Addr().String() + "/v1/chat/completions"
}

// sendAll makes n calls of send from conc goroutines and returns the first error.
func sendAll(n, conc int, send func() error) error {
	var next atomic.Int64
	errs := make(chan error, conc)
	for range conc {
		go func() { // exits once n calls were taken, or at its first error
			for next.Add(1) <= int64(n) {
				if err := send(); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	var first error
	for range conc {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// cpuTime is the process's user+sys CPU so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSpansAlone is the OpenTelemetry SDK's own cost for what BenchmarkRequest's "on"
// records per request, with nothing of Tollgate's around it: the spans of one real request
// (recorded in memory first) are made again per op with the same names, kinds, tree and
// attributes, each span's attributes given in one call, through the batch span processor and
// OTLP/HTTP exporter NewTracing uses, to a receiver in this process. The processor blocks
// when its queue is full, so that the loop, far faster than requests come, waits for the
// exporter instead of dropping spans. Against BenchmarkRequest's on−off difference it says
// how much of tracing's cost is the SDK's.
func BenchmarkSpansAlone(b *testing.B) {
	app.TuneGC()
	backend := httptest.NewServer(fakellm.New(fakellm.Options{}))
	b.Cleanup(backend.Close)
	recorded := recordSpans(b, backend.URL)
	recv := startReceiver(b)
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(recv.URL+"/v1/traces"))
	if err != nil {
		b.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithBlocking()))
	tr := tp.Tracer("bench")
	cpu0 := cpuTime(b)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		replay(tr, recorded)
	}
	if err := tp.Shutdown(context.Background()); err != nil { // the last batch's export counts
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	b.ReportMetric(float64(recv.bytes.Load())/float64(b.N), "exported-B/op")
	if recv.exports.Load() == 0 {
		b.Fatal("no span reached the receiver")
	}
}

// recordSpans sends one request through a gateway tracing into memory and returns its spans:
// the request's first, then its children.
func recordSpans(b *testing.B, backendURL string) []tracetest.SpanStub {
	mem := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(mem))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	url := serveBench(b, backendURL, app.Options{Logger: zerolog.Nop(), Tracer: tp.Tracer("record"), NoMetrics: true})
	res, err := http.Post(url, "application/json", bytes.NewReader(benchBody))
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for len(mem.GetSpans()) < 3 { // the request's span ends once the handler has returned
		if time.Now().After(deadline) {
			b.Fatalf("%d spans recorded, want 3", len(mem.GetSpans()))
		}
		time.Sleep(time.Millisecond) // polling with a deadline
	}
	spans := mem.GetSpans()
	root := slices.IndexFunc(spans, func(s tracetest.SpanStub) bool { return !s.Parent.IsValid() })
	if root < 0 {
		b.Fatalf("no root among %d spans", len(spans))
	}
	spans[0], spans[root] = spans[root], spans[0]
	return spans
}

// replay makes the spans again: spans[0] the root, the others its children.
func replay(tr trace.Tracer, spans []tracetest.SpanStub) {
	ctx, root := tr.Start(context.Background(), spans[0].Name, trace.WithSpanKind(spans[0].SpanKind))
	for _, s := range spans[1:] {
		_, child := tr.Start(ctx, s.Name, trace.WithSpanKind(s.SpanKind))
		child.SetAttributes(s.Attributes...)
		child.End()
	}
	root.SetAttributes(spans[0].Attributes...)
	root.End()
}
