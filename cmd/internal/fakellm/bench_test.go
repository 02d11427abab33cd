package fakellm

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// discardWriter is a flushable ResponseWriter that keeps nothing.
type discardWriter struct {
	h http.Header
	n int
}

func (w *discardWriter) Header() http.Header { return w.h }
func (w *discardWriter) WriteHeader(int)     {}
func (w *discardWriter) Flush()              {}
func (w *discardWriter) Write(b []byte) (int, error) {
	w.n += len(b)
	return len(b), nil
}

// benchStream measures the server's own cost of one 20-chunk stream of ep, without the network.
func benchStream(b *testing.B, ep endpoint) {
	srv := New(Options{})
	body := ep.body("fake-model", true)
	path := strings.Replace(ep.path(true), "MODEL", "fake-model", 1)
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		w := &discardWriter{h: http.Header{}}
		srv.ServeHTTP(w, r)
		if w.n < 1000 {
			b.Fatalf("only %d bytes written", w.n)
		}
	}
}

func BenchmarkStreamChat(b *testing.B)      { benchStream(b, endpoints[0]) }
func BenchmarkStreamResponses(b *testing.B) { benchStream(b, endpoints[1]) }
func BenchmarkStreamAnthropic(b *testing.B) { benchStream(b, endpoints[2]) }
func BenchmarkStreamGemini(b *testing.B)    { benchStream(b, endpoints[3]) }

// BenchmarkStreamChatHTTP runs 20-chunk chat streams over loopback, 50 at a time as the
// gateway benchmarks do.
func BenchmarkStreamChatHTTP(b *testing.B) {
	ts := httptest.NewServer(New(Options{}))
	defer ts.Close()
	client := ts.Client()
	client.Transport.(*http.Transport).MaxIdleConnsPerHost = 64
	b.SetParallelism(25) // × GOMAXPROCS (2) = 50 concurrent streams
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, ts.URL+"/v1/chat/completions",
				strings.NewReader(chatStreamBody))
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}
