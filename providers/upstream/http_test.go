package upstream

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

func TestTimeout(t *testing.T) {
	tests := []struct{ d, def, want time.Duration }{
		{0, time.Minute, time.Minute},
		{-1, time.Minute, 0},
		{time.Second, time.Minute, time.Second},
	}
	for _, tt := range tests {
		if got := Timeout(tt.d, tt.def); got != tt.want {
			t.Errorf("Timeout(%v, %v) = %v, want %v", tt.d, tt.def, got, tt.want)
		}
	}
}

func TestNewHTTPClient(t *testing.T) {
	c := NewHTTPClient(3*time.Second, 40)
	tr := c.Transport.(*http.Transport)
	if tr.TLSHandshakeTimeout != 3*time.Second || tr.ResponseHeaderTimeout != 0 || c.Timeout != 0 {
		t.Errorf("timeouts: TLS %v, header %v, whole call %v", tr.TLSHandshakeTimeout, tr.ResponseHeaderTimeout, c.Timeout)
	}
	if tr.MaxIdleConnsPerHost != 40 || tr.MaxIdleConns != 0 || !tr.DisableCompression || !tr.ForceAttemptHTTP2 {
		t.Errorf("pool %d per host, %d in all, compression off %v, HTTP/2 %v",
			tr.MaxIdleConnsPerHost, tr.MaxIdleConns, tr.DisableCompression, tr.ForceAttemptHTTP2)
	}
	if got := NewTransport(0, 0).MaxIdleConnsPerHost; got != DefaultIdlePerHost {
		t.Errorf("idle 0: pool %d per host, want DefaultIdlePerHost", got)
	}
}

// TestPoolCoversLanes: calls held at once, as many as the pool's size, then again and again,
// reuse the connections of the first wave: the backend accepts no connection after it.
func TestPoolCoversLanes(t *testing.T) {
	const lanes = 300 // above net/http's own default of 2 idle per host, and the old 256
	var accepted atomic.Int64
	var release atomic.Pointer[chan struct{}] // this wave's
	var arrived atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wave := *release.Load()
		arrived.Add(1)
		<-wave // held until every call of the wave is running
		io.WriteString(w, "ok")
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			accepted.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	client := NewHTTPClient(time.Second, lanes)
	defer client.CloseIdleConnections()
	for wave := range 3 {
		arrived.Store(0)
		held := make(chan struct{})
		release.Store(&held)
		var wg sync.WaitGroup
		errs := make(chan error, lanes)
		for range lanes {
			wg.Add(1)
			go func() { // exits when its call is answered
				defer wg.Done()
				resp, err := client.Get(srv.URL)
				if err != nil {
					errs <- err
					return
				}
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil {
					errs <- err
				}
			}()
		}
		deadline := time.Now().Add(20 * time.Second)
		for arrived.Load() < lanes {
			if time.Now().After(deadline) {
				t.Fatalf("wave %d: %d of %d calls reached the backend", wave, arrived.Load(), lanes)
			}
			time.Sleep(time.Millisecond) // polling for the wave to be held in full
		}
		close(held)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("wave %d: %v", wave, err)
		}
		if got := accepted.Load(); got != lanes {
			t.Fatalf("after wave %d the backend accepted %d connections, want the first wave's %d", wave, got, lanes)
		}
	}
}

// TestSend covers the outcomes of one call against a loopback server.
func TestSend(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") })
	mux.HandleFunc("/silent", func(w http.ResponseWriter, r *http.Request) {
		select { // never sends headers
		case <-r.Context().Done():
		case <-release:
		}
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("x-api-key") == "" {
			t.Error("redirect target reached without the key: the client followed the redirect")
		}
		http.Redirect(w, r, "/ok", http.StatusFound)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	client := NewHTTPClient(time.Second, 0)
	defer client.CloseIdleConnections()

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name       string
		ctx        context.Context
		path       string
		header     time.Duration
		wantStatus int
		wantErr    error // matched with errors.Is
	}{
		{name: "answer", ctx: context.Background(), path: "/ok", header: time.Second, wantStatus: 200},
		{name: "no header timeout", ctx: context.Background(), path: "/ok", wantStatus: 200},
		{name: "redirect not followed", ctx: context.Background(), path: "/redirect", wantStatus: http.StatusFound},
		{name: "silent backend", ctx: context.Background(), path: "/silent", header: 20 * time.Millisecond, wantErr: ErrHeaderTimeout},
		{name: "caller cancelled", ctx: cancelled, path: "/silent", header: time.Second, wantErr: context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, srv.URL+tt.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("x-api-key", "sk-secret")
			resp, done, err := Send(tt.ctx, client, req, tt.header)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				if errors.Is(err, ErrHeaderTimeout) && !strings.Contains(err.Error(), "within 20ms") {
					t.Errorf("err = %q does not say how long it waited", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer done()
			defer resp.Body.Close()
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status = %d, want %d", resp.StatusCode, tt.wantStatus)
			}
		})
	}
}

// TestSendCancelEndsCall: the returned cancel aborts a body still being read.
func TestSendCancelEndsCall(t *testing.T) {
	gone := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(gone)
	}))
	defer srv.Close()
	client := NewHTTPClient(time.Second, 0)
	defer client.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	resp, done, err := Send(context.Background(), client, req, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	done()
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Error("body read to a clean end after cancel")
	}
	resp.Body.Close()
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("backend still serving after cancel")
	}
}

func TestTransportError(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		err     error
		wantCtx bool
		wantMsg string
	}{
		{name: "caller went away", ctx: cancelled, err: errors.New("boom"), wantCtx: true},
		{name: "plain", ctx: context.Background(), err: errors.New("dial sk-secret-key refused"),
			wantMsg: "calling backend: dial [redacted] refused"},
		{name: "header timeout", ctx: context.Background(), err: ErrHeaderTimeout,
			wantMsg: "calling backend: timed out: no response headers"},
		{name: "net timeout", ctx: context.Background(), err: timeoutErr{},
			wantMsg: "calling backend: timed out waiting for the backend: i/o timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := TransportError(tt.ctx, "p", "calling backend", tt.err, "sk-secret-key")
			if tt.wantCtx {
				if !errors.Is(err, context.Canceled) {
					t.Errorf("err = %v, want the context's", err)
				}
				return
			}
			e, ok := errors.AsType[*llm.Error](err)
			if !ok || e.Kind != llm.KindUpstream || e.Provider != "p" || e.Message != tt.wantMsg || !errors.Is(err, tt.err) {
				t.Errorf("err = %#v, want upstream %q", err, tt.wantMsg)
			}
		})
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }
