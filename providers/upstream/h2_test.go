package upstream

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// newH2Server starts a TLS server that offers HTTP/2 and counts the connections it accepts,
// and returns a client made by NewHTTPClient that trusts it.
func newH2Server(t testing.TB, h http.Handler) (*httptest.Server, *http.Client, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = true
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	client := NewHTTPClient(5*time.Second, 8)
	client.Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
	t.Cleanup(client.CloseIdleConnections)
	return srv, client, &conns
}

// TestH2StalledStreamStallsNoOther: on one HTTP/2 connection, a stream whose reader stops
// stops at its own flow-control window, and the other streams on the connection are served
// to their end meanwhile.
func TestH2StalledStreamStallsNoOther(t *testing.T) {
	const chunk = 16 << 10
	var stalledSent atomic.Int64 // bytes the stalled stream's handler got written
	stalledBlocked := make(chan struct{})
	srv, client, conns := newH2Server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if r.URL.Path == "/stalled" {
			// Far more than the stream window: only a reader would let it all through.
			buf := make([]byte, chunk)
			for i := 0; i < 8*StreamWindow/chunk; i++ {
				rc.SetWriteDeadline(time.Now().Add(300 * time.Millisecond))
				if _, err := w.Write(buf); err != nil {
					close(stalledBlocked) // its window is full: the write cannot go on
					<-r.Context().Done()
					return
				}
				stalledSent.Add(chunk)
				rc.Flush()
			}
			return
		}
		for i := range 20 { // an LLM-sized stream
			fmt.Fprintf(w, "data: %d\n\n", i)
			rc.Flush()
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/stalled", nil)
	stalled, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Body.Close()
	if stalled.ProtoMajor != 2 {
		t.Fatalf("the backend offered h2 and the transport spoke %s", stalled.Proto)
	}
	// Read nothing more of it. The server's write blocks once the window is full.
	select {
	case <-stalledBlocked:
	case <-time.After(20 * time.Second):
		t.Fatalf("the stalled stream's writes never blocked (%d bytes sent)", stalledSent.Load())
	}
	if sent := stalledSent.Load(); sent > 2*StreamWindow {
		t.Errorf("a stream nobody reads took %d bytes, want at most about its window (%d)", sent, StreamWindow)
	}

	// A stall would show as a hang: the other streams' wait is bounded.
	okCtx, okCancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer okCancel()
	for i := range 5 {
		req, _ := http.NewRequestWithContext(okCtx, http.MethodGet, srv.URL+"/ok", nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("stream %d beside the stalled one: %v", i, err)
		}
		events, done := 0, false
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			events += strings.Count(sc.Text(), "data: ")
			done = done || sc.Text() == "data: [DONE]"
		}
		resp.Body.Close()
		if err := sc.Err(); err != nil || !done || events != 21 || resp.ProtoMajor != 2 {
			t.Fatalf("stream %d beside the stalled one: %d events, [DONE] %v, %s, %v", i, events, done, resp.Proto, err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("the streams used %d connections, want them all on one", n)
	}
}
