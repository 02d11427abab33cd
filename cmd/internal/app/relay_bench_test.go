package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/cmd/internal/config"
	"github.com/tollgate/tollgate/cmd/internal/fakellm"
)

// BenchmarkRelay is one request through the whole gateway as cmd/tollgate serves it (its
// HTTP server, the actors, the openai adapter, the upstream transport) against an in-process
// fake backend on loopback, one request at a time. Its B/op and allocs/op count what a call
// costs the gateway, plus the client's and the fake backend's share, which does not change
// between two builds; the wall-clock figures of the relay live in `make bench-relay`.
//
// The proxy/ cases put a bare httputil.ReverseProxy where the gateway is: what is left of
// a case's figures once its proxy/ twin's are taken away is the gateway's own.
//
// TOLLGATE_RELAY_GC=binary gives the process the binary's collector settings (TuneGC: the
// heap floor), as .ci/instructions does: without them the benchmark's small heap makes the
// collector run every few hundred calls, and its work swamps a count of one call's.
func BenchmarkRelay(b *testing.B) {
	if os.Getenv("TOLLGATE_RELAY_GC") == "binary" {
		TuneGC()
	}
	line := func(stream bool) string {
		return fmt.Sprintf(`{"model":"bench/m","stream":%t,"messages":[{"role":"user","content":"hello there"}]}`, stream)
	}
	const chat = "/v1/chat/completions"
	for _, c := range []struct {
		name, path, body string
		serve            func(*testing.B, string) string
	}{
		{"non-stream", chat, line(false), gatewayTo}, {"stream", chat, line(true), gatewayTo}, {"agent", chat, agentRequest(b), gatewayTo},
		{"proxy/non-stream", chat, line(false), proxyTo}, {"proxy/stream", chat, line(true), proxyTo}, {"proxy/agent", chat, agentRequest(b), proxyTo},
		// A coding agent's stream in its own API, beside the chat stream's case: Responses
		// relayed as sent to the openai backend's own /v1/responses (each event checked and
		// read), Messages translated to chat for it and back.
		{"responses", "/v1/responses", `{"model":"bench/m","stream":true,"store":false,"input":"hello there"}`, gatewayTo},
		{"messages", "/v1/messages", `{"model":"bench/m","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hello there"}]}`, gatewayTo},
	} {
		path, body := c.path, c.body
		b.Run(c.name, func(b *testing.B) {
			base := c.serve(b, benchFake(b))
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
			defer client.CloseIdleConnections()
			b.ReportAllocs()
			cpu0 := cpuTime(b)
			for b.Loop() {
				resp, err := client.Post(base+path, "application/json", bytes.NewBufferString(body))
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK || n == 0 {
					b.Fatalf("status %d, %d bytes", resp.StatusCode, n)
				}
			}
			b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// agentRequest is a coding agent's streaming request: 40 turns of source code, about 200 KB,
// where the other cases send a line (the "agent" cases).
func agentRequest(b *testing.B) string {
	msgs := make([]map[string]string, 40)
	for i := range msgs {
		msgs[i] = map[string]string{"role": []string{"user", "assistant"}[i%2],
			"content": strings.Repeat("func main() {\n\tfmt.Println(\"hello, world\")\n}\n", 100)}
	}
	body, err := json.Marshal(map[string]any{"model": "bench/m", "stream": true, "messages": msgs})
	if err != nil {
		b.Fatal(err)
	}
	return string(body)
}

// cpuTime is the CPU time (user and system) this process has used: the steadier figure on a
// machine shared with other work, where ns/op moves with the load.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// proxyTo serves a bare reverse proxy to backend and returns its URL.
//
// The proxy's connections are full duplex. Without that, Go's HTTP/1 server discards and
// closes a request body the handler has not read to its end once the answer's headers are
// flushed, which a streaming proxy does as soon as the backend's arrive (FlushInterval -1):
// the transport, still reading the body's end to forward it, then reads a closed body,
// fails the backend connection and cuts the stream short. On loopback about one stream in
// a hundred broke so.
func proxyTo(b *testing.B, backend string) string {
	target, err := url.Parse(backend)
	if err != nil {
		b.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1
	rp.ErrorLog = log.New(io.Discard, "", 0) // the clients' hang-ups at the end are no news
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
			http.Error(w, "full duplex: "+err.Error(), http.StatusInternalServerError)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	b.Cleanup(srv.Close)
	return srv.URL
}

// benchFake serves a fake backend that answers at once with 20 chunks; it stops when b ends.
func benchFake(b *testing.B) string {
	fake := httptest.NewServer(fakellm.New(fakellm.Options{Chunks: 20}))
	b.Cleanup(fake.Close)
	return fake.URL
}

// gatewayTo serves an App relaying to backend and returns its URL; it stops when b ends.
func gatewayTo(b *testing.B, backend string) string {
	yaml := fmt.Sprintf(`drain_delay: 0s
limits: {max_running: 2048, max_admitted: 4096, queue_length: 2048}
providers:
  - name: bench
    kind: openai
    base_url: %s/v1
    keys: [x]
    lanes: 2048
    model_lanes: 2048
    refresh_models: 0s
    models:
      - id: m
`, backend)
	cfg, err := config.Parse("bench.yaml", []byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		b.Fatalf("config: %v", err)
	}
	a, err := New(context.Background(), cfg, Options{Logger: zerolog.Nop(), NoMetrics: true})
	if err != nil {
		b.Fatalf("app: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := a.Server()
	go func() { _ = srv.Serve(ln) }() // exits when the server is closed below
	b.Cleanup(func() {
		_ = srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = a.Drain(ctx)
	})
	return "http://" + ln.Addr().String()
}
