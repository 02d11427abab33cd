package upstream

import (
	"fmt"
	"io"
	"net/http"
	"testing"
)

// BenchmarkTLSStreams compares HTTP/1.1 and HTTP/2 to a TLS backend, as NewTransport speaks
// them: many calls at once, each a stream of 20 small events, read to its end. It reports
// the connections the backend accepted (HTTP/1.1 needs one per call at once, each with its
// TLS handshake and buffers; HTTP/2 shares them, but calls that start together before a
// connection is up dial their own: 64 against 96 on 2026-12-01) beside the time and memory
// per call.
//
//	go test -run '^$' -bench BenchmarkTLSStreams -benchtime 2000x ./providers/upstream/
func BenchmarkTLSStreams(b *testing.B) {
	for _, proto := range []string{"h1", "h2"} {
		b.Run(proto, func(b *testing.B) {
			srv, client, conns := newH2Server(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				rc := http.NewResponseController(w)
				for i := range 20 {
					fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":\"word %d\"}}]}\n\n", i)
					rc.Flush()
				}
				io.WriteString(w, "data: [DONE]\n\n")
			}))
			tr := client.Transport.(*http.Transport)
			if proto == "h1" {
				var p http.Protocols
				p.SetHTTP1(true)
				tr.Protocols = &p
				tr.TLSClientConfig.NextProtos = nil
			}
			tr.MaxIdleConnsPerHost = 256
			b.SetParallelism(32) // × GOMAXPROCS calls at once
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := client.Get(srv.URL)
					if err != nil {
						b.Error(err)
						return
					}
					if (resp.ProtoMajor == 2) != (proto == "h2") {
						b.Errorf("spoke %s", resp.Proto)
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(conns.Load()), "conns")
		})
	}
}
