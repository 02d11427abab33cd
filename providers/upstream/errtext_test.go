package upstream

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/tollgate/tollgate/providers/llm"
)

// TestTransportErrorHidesAddresses: the client's message says what failed without the
// backend's URL, addresses, host name or certificate names; the log's detail keeps them.
func TestTransportErrorHidesAddresses(t *testing.T) {
	const target = "http://10.1.2.3:8443/v1/chat/completions"
	addr := &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 8443}
	refused := &net.OpError{Op: "dial", Net: "tcp", Addr: addr, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	reset := &net.OpError{Op: "read", Net: "tcp", Source: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 9), Port: 51000}, Addr: addr,
		Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	dns := &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "llm.corp.internal", Server: "10.0.0.53:53", IsNotFound: true}}
	cert := &tls.CertificateVerificationError{Err: x509.HostnameError{Certificate: &x509.Certificate{DNSNames: []string{"other.corp.internal"}}, Host: "llm.corp.internal"}}
	tests := []struct {
		name, what string
		err        error
		hidden     []string // in the detail, never in the message
		wantMsg    string
	}{
		{"refused", "calling backend", &url.Error{Op: "Post", URL: target, Err: refused}, []string{target, "10.1.2.3", "8443"},
			"calling backend: dial tcp: connect: connection refused"},
		{"reset while reading", "reading the answer", reset, []string{"10.1.2.3:8443", "10.0.0.9:51000"},
			"reading the answer: read tcp: read: connection reset by peer"},
		{"no such host", "calling backend", &url.Error{Op: "Post", URL: "https://llm.corp.internal/v1", Err: dns},
			[]string{"llm.corp.internal", "10.0.0.53"}, "calling backend: dial tcp: lookup of the backend's host: no such host"},
		{"certificate for another name", "calling backend", &url.Error{Op: "Post", URL: "https://llm.corp.internal/v1", Err: cert},
			[]string{"llm.corp.internal", "other.corp.internal"},
			"calling backend: tls: failed to verify certificate: x509: the backend's certificate is not valid for its host name"},
		{"wrapped", "calling backend", &url.Error{Op: "Post", URL: target, Err: fmt.Errorf("net/http: Transport failed to read from server: %w", reset)},
			[]string{target, "10.1.2.3:8443"}, "calling backend: net/http: Transport failed to read from server: read tcp: read: connection reset by peer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, ok := errors.AsType[*llm.Error](TransportError(context.Background(), "p", tt.what, tt.err))
			if !ok || e.Kind != llm.KindUpstream || !errors.Is(e, tt.err) {
				t.Fatalf("got %#v, want an upstream error wrapping the cause", e)
			}
			if e.Message != tt.wantMsg {
				t.Errorf("message %q, want %q", e.Message, tt.wantMsg)
			}
			for _, h := range tt.hidden {
				if strings.Contains(e.Message, h) {
					t.Errorf("message %q shows %q", e.Message, h)
				}
				if !strings.Contains(e.Detail, h) {
					t.Errorf("detail %q lacks %q", e.Detail, h)
				}
			}
		})
	}
}

// TestRefusedConnectionMessage: a real call to a port nothing listens on fails with a
// message that names neither the URL nor the address; the detail names both.
func TestRefusedConnectionMessage(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there now
	req, err := http.NewRequest("POST", "http://"+addr+"/v1/chat/completions", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = Send(context.Background(), &http.Client{}, req, 0)
	if err == nil {
		t.Fatal("a call to a closed port succeeded")
	}
	e, ok := errors.AsType[*llm.Error](TransportError(context.Background(), "p", "calling backend", err))
	if !ok {
		t.Fatalf("got %#v, want an upstream error", err)
	}
	if strings.Contains(e.Message, addr) || strings.Contains(e.Message, "/v1/") || !strings.Contains(e.Message, "refused") {
		t.Errorf("message %q: want the refusal without the address %s or the path", e.Message, addr)
	}
	if !strings.Contains(e.Detail, "http://"+addr+"/v1/chat/completions") {
		t.Errorf("detail %q lacks the URL", e.Detail)
	}
}
