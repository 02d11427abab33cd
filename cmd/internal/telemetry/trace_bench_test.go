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
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/tollgate/tollgate/cmd/internal/app"
	"github.com/tollgate/tollgate/cmd/internal/config"
	"github.com/tollgate/tollgate/cmd/internal/fakellm"
	"github.com/tollgate/tollgate/cmd/internal/telemetry"
)

// BenchmarkRequest is what one request costs with telemetry off and on, through a whole
// in-process gateway (app.New, served on loopback) relaying to an in-process fakellm, as the
// relay benchmark runs it (docs/benchmarks.md, issue 14) but without its noise: "off" counts
// nothing and traces nothing; "on" counts, and records every span (sampler always_on) and
// exports it over OTLP/HTTP to a receiver in this process; "unsampled" is "on" with a sampler
// that keeps no request (always_off), what the requests a ratio sampler leaves out cost. Requests go one at a time (c=1) or
// 50 at a time (c=50), with the collector settings of the gateway binaries (app.TuneGC).
// Besides ns/op and allocs/op it reports cpu-µs/op, the process's user+sys CPU over the
// requests (client, gateway, backend and receiver; the last batch's export included), the
// steadier figure on a shared machine. Run it with
//
//	go test -run '^$' -bench BenchmarkRequest -benchmem ./cmd/internal/telemetry/
func BenchmarkRequest(b *testing.B) {
	app.TuneGC()
	backend := httptest.NewServer(fakellm.New(fakellm.Options{}))
	b.Cleanup(backend.Close)
	var exports atomic.Int64
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		exports.Add(1)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK) // an empty ExportTraceServiceResponse: all accepted
	}))
	b.Cleanup(recv.Close)
	for _, stream := range []bool{false, true} {
		for _, conc := range []int{1, 50} {
			for _, mode := range []string{"off", "on", "unsampled"} {
				name := fmt.Sprintf("%s/c=%d/%s", map[bool]string{false: "whole", true: "stream"}[stream], conc, mode)
				b.Run(name, func(b *testing.B) {
					before := exports.Load()
					benchRequests(b, backend.URL, recv.URL, stream, conc, mode)
					if mode == "on" && exports.Load() == before {
						b.Fatal("tracing on, but no span reached the receiver")
					}
				})
			}
		}
	}
}

// benchRequests serves a gateway relaying to backendURL, tracing to otlpURL unless mode is
// off, and sends it b.N chat requests, conc at a time.
func benchRequests(b *testing.B, backendURL, otlpURL string, stream bool, conc int, mode string) {
	on := mode != "off"
	b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlpURL)
	b.Setenv("OTEL_TRACES_SAMPLER", map[bool]string{false: "always_off", true: "always_on"}[mode == "on"])
	b.Setenv("OTEL_SDK_DISABLED", map[bool]string{false: "true", true: "false"}[on])
	// NewTracing installs W3C's propagator when on; the next run starts without it, as off.
	b.Cleanup(func() { otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator()) })
	tr, err := telemetry.NewTracing(context.Background(), os.LookupEnv, "bench")
	if err != nil {
		b.Fatal(err)
	}
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
	a, err := app.New(context.Background(), cfg, app.Options{Logger: zerolog.Nop(), Tracer: tr.Tracer, NoMetrics: !on})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := a.Server()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }() // exits when srv is closed below
	defer func() {
		_ = srv.Close()
		<-served
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = a.Drain(ctx)
	}()

	url := "http://" + ln.Addr().String() + "/v1/chat/completions"
	body := []byte(`{"model":"bench/fake-model","stream":false,"messages":[{"role":"user","content":"Say hello in twenty words."}]}`)
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
	b.StopTimer()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil { // the last batch's export is part of the cost
		b.Fatal(err)
	}
	b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
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
