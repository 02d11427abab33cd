package upstream

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
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
	c := NewHTTPClient(3 * time.Second)
	tr := c.Transport.(*http.Transport)
	if tr.TLSHandshakeTimeout != 3*time.Second || tr.ResponseHeaderTimeout != 0 || c.Timeout != 0 {
		t.Errorf("timeouts: TLS %v, header %v, whole call %v", tr.TLSHandshakeTimeout, tr.ResponseHeaderTimeout, c.Timeout)
	}
	if tr.MaxIdleConnsPerHost < 100 || !tr.DisableCompression {
		t.Errorf("pool %d, compression off %v", tr.MaxIdleConnsPerHost, tr.DisableCompression)
	}
	if SharedHTTPClient(time.Second) != SharedHTTPClient(time.Second) || SharedHTTPClient(time.Second) == SharedHTTPClient(2*time.Second) {
		t.Error("shared clients are not one per connect timeout")
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
	client := NewHTTPClient(time.Second)
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
	client := NewHTTPClient(time.Second)
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
