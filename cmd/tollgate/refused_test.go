package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// TestRefusedBackendAddressStaysInLog: a backend that refuses connections is answered 502
// upstream_error saying so, in every family and ingress format, without the backend's URL
// or address, which the request's log line keeps for the operator.
func TestRefusedBackendAddressStaysInLog(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there now: every connection is refused
	var yaml strings.Builder
	yaml.WriteString("providers:\n")
	for _, p := range []struct{ name, kind, base string }{
		{"gone", "openai", "http://" + addr + "/v1"}, {"gone-an", "anthropic", "http://" + addr}, {"gone-ge", "gemini", "http://" + addr + "/v1beta"},
	} {
		fmt.Fprintf(&yaml, "  - name: %s\n    kind: %s\n    base_url: %s\n    keys: [k]\n    models: [{id: m}, {id: e, type: embedding}]\n%s", p.name, p.kind, p.base, noResilience)
	}
	logs := &syncBuffer{}
	g := serveGateway(t, yaml.String(), nil, zerolog.New(logs))
	for _, tc := range []struct{ id, path, body string }{
		{"chat-openai", "/v1/chat/completions", `{"model":"gone/m","messages":[{"role":"user","content":"hi"}]}`},
		{"chat-anthropic", "/v1/chat/completions", `{"model":"gone-an/m","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"chat-gemini", "/v1/chat/completions", `{"model":"gone-ge/m","messages":[{"role":"user","content":"hi"}]}`},
		{"messages", "/v1/messages", `{"model":"gone/m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`},
		{"responses", "/v1/responses", `{"model":"gone-an/m","input":"hi"}`},
		{"embeddings-openai", "/v1/embeddings", `{"model":"gone/e","input":["a","b"]}`},
		{"embeddings-gemini", "/v1/embeddings", `{"model":"gone-ge/e","input":["a","b"]}`},
		{"completions", "/v1/completions", `{"model":"gone/m","prompt":"a","suffix":"b","stream":true}`},
	} {
		t.Run(tc.id, func(t *testing.T) {
			req, err := http.NewRequest("POST", g.URL+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Request-Id", tc.id)
			req.Header.Set("Content-Type", "application/json")
			resp, err := rawClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "upstream_error") || !strings.Contains(string(body), "connection refused") {
				t.Fatalf("status %d %s: want 502 upstream_error saying the connection was refused", resp.StatusCode, body)
			}
			_, port, _ := net.SplitHostPort(addr)
			if strings.Contains(string(body), "127.0.0.1") || strings.Contains(string(body), port) || strings.Contains(string(body), "http://") {
				t.Errorf("the client's error shows the backend's address %s: %s", addr, body)
			}
			// The line is written as the handler returns, before the server sends an answer
			// it has not flushed: it is in the log by the time the body was read.
			line := requestLine(logs.String(), tc.id)
			if !strings.Contains(line, addr) || !strings.Contains(line, "connection refused") {
				t.Errorf("the log line does not keep the backend's address %s: %s", addr, line)
			}
		})
	}
}

// requestLine is the request log line ("chat") of request id in logs, or "".
func requestLine(logs, id string) string {
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, `"request_id":"`+id+`"`) && strings.Contains(line, `"message":"chat"`) {
			return line
		}
	}
	return ""
}
