package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/providers/llm"
)

// The bodies of one request per format, streamed and whole.
const (
	chatStreamBody      = `{"model":"p/m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	chatWholeBody       = `{"model":"p/m","messages":[{"role":"user","content":"hi"}]}`
	responsesStreamBody = `{"model":"p/m","input":"hi","stream":true}`
	responsesWholeBody  = `{"model":"p/m","input":"hi"}`
	messagesStreamBody  = `{"model":"p/m","max_tokens":50,"messages":[{"role":"user","content":"hi"}],"stream":true}`
	messagesWholeBody   = `{"model":"p/m","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`
	embedBody           = `{"model":"p/e","input":"hi"}`
)

// logLine is what the relay rules put in a request's log line.
type logLine struct {
	Status           int    `json:"status"`
	Code             string `json:"code"`
	Error            string `json:"error"`
	ClientDisconnect bool   `json:"client_disconnect"`
	TokensIn         int    `json:"tokens_in"`
}

// relayOnce serves one request whose call streams st, writing the answer to w, and returns
// the request's log line.
func relayOnce(t *testing.T, w http.ResponseWriter, st llm.Stream, path, body string) logLine {
	t.Helper()
	var logs bytes.Buffer
	s := New(Options{Gateway: stubStreamGateway{st}, Logger: zerolog.New(&logs)})
	s.ServeHTTP(w, httptest.NewRequest("POST", path, strings.NewReader(body)))
	var l logLine
	if err := json.Unmarshal(bytes.TrimSpace(logs.Bytes()), &l); err != nil {
		t.Fatalf("log %q: %v", logs.String(), err)
	}
	return l
}

// TestRelayBackendFailures: a chunk no format can take, and an embeddings answer that is not
// one, are the backend's failure (502 in the log) in every format, before the first byte as
// the format's error answer, after it as its error event in a 200.
func TestRelayBackendFailures(t *testing.T) {
	garbage := llm.Chunk{Raw: []byte(`{"choices":[{"delta":{"content":7}}]}`)}
	list := llm.Chunk{Raw: []byte(`{"object":"list","data":[]}`), Complete: true, Format: llm.FormatEmbeddings,
		Usage: &llm.Usage{PromptTokens: 2}}
	cases := []struct {
		name, path, body string
		chunks           []llm.Chunk
		status           int // the answer's
		code             string
		body2            string // what the answer's body holds
	}{
		{"chat whole, undecodable", chatRoute, chatWholeBody, []llm.Chunk{garbage}, 502, "upstream_error", `"code":"upstream_error"`},
		{"responses whole, undecodable", "/v1/responses", responsesWholeBody, []llm.Chunk{garbage}, 502, "upstream_error", `"code":"upstream_error"`},
		{"messages whole, undecodable", "/v1/messages", messagesWholeBody, []llm.Chunk{garbage}, 502, "upstream_error", `"type":"api_error"`},
		{"messages stream, undecodable", "/v1/messages", messagesStreamBody, []llm.Chunk{{Content: "a"}, garbage}, 200, "upstream_error",
			"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"backend sent an undecodable chunk"},
		{"responses stream, undecodable", "/v1/responses", responsesStreamBody, []llm.Chunk{garbage}, 200, "upstream_error",
			"event: response.failed\n"},
		{"embeddings, a list", "/v1/embeddings", embedBody, []llm.Chunk{list}, 200, "", `{"object":"list","data":[]}`},
		{"embeddings, not a list", "/v1/embeddings", embedBody, []llm.Chunk{{Content: "hi"}}, 502, "upstream_error",
			"the backend did not answer with an embeddings list"},
		{"embeddings, nothing", "/v1/embeddings", embedBody, nil, 502, "upstream_truncated",
			"the backend's answer ended without an embeddings list"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sc := &script{chunks: tc.chunks}
			w := httptest.NewRecorder()
			l := relayOnce(t, w, sc, tc.path, tc.body)
			if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.body2) {
				t.Errorf("%d %s, want %d with %q", w.Code, w.Body, tc.status, tc.body2)
			}
			logged := 200
			if tc.code != "" {
				logged = 502
			}
			if l.Code != tc.code || l.Status != logged || !sc.closed {
				t.Errorf("logged %+v (stream closed %v), want status %d code %q", l, sc.closed, logged, tc.code)
			}
		})
	}
}

// hangUp is a client that reads the answer's headers and then is gone: every write of the
// body fails.
type hangUp struct {
	*httptest.ResponseRecorder
	wrote bool // a write was tried
}

func (h *hangUp) Write([]byte) (int, error) { h.wrote = true; return 0, errors.New("broken pipe") }

func (h *hangUp) FlushError() error {
	if h.wrote {
		return errors.New("broken pipe")
	}
	return nil
}

// TestRelayClientGone: a client that hangs up during the answer is a 499 with
// client_disconnect in the log line, never the backend's failure, in every format, and the
// backend's stream is closed; the usage the backend had reported by then is still counted.
func TestRelayClientGone(t *testing.T) {
	chunks := []llm.Chunk{{Content: "a", Usage: &llm.Usage{PromptTokens: 4}}, {Content: "b"}, {FinishReason: llm.FinishStop}}
	whole := []llm.Chunk{{Raw: []byte(`{"id":"c","object":"chat.completion","choices":[]}`), Complete: true,
		Usage: &llm.Usage{PromptTokens: 4}}}
	cases := []struct {
		name, path, body string
		chunks           []llm.Chunk
	}{
		{"chat stream", chatRoute, chatStreamBody, chunks},
		{"responses stream", "/v1/responses", responsesStreamBody, chunks},
		{"messages stream", "/v1/messages", messagesStreamBody, chunks},
		{"messages native stream", "/v1/messages", messagesStreamBody, []llm.Chunk{{Format: llm.FormatMessages,
			Event: "message_start", Raw: []byte(`{"type":"message_start"}`), Usage: &llm.Usage{PromptTokens: 4}}}},
		{"chat whole as it came", chatRoute, chatWholeBody, whole},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sc := &script{chunks: append([]llm.Chunk(nil), tc.chunks...)}
			l := relayOnce(t, &hangUp{ResponseRecorder: httptest.NewRecorder()}, sc, tc.path, tc.body)
			if l.Status != 499 || !l.ClientDisconnect || l.Code != "" || l.TokensIn != 4 || !sc.closed {
				t.Errorf("logged %+v (stream closed %v), want a 499 client_disconnect with 4 tokens in", l, sc.closed)
			}
		})
	}
}

// TestRelayHangUpMidStream: a call cancelled because its client left ends the stream with
// nothing more written: no error event, a 499 in the log, in every format.
func TestRelayHangUpMidStream(t *testing.T) {
	for _, tc := range []struct{ path, body, last string }{
		{chatRoute, chatStreamBody, `"content":"a"`},
		{"/v1/responses", responsesStreamBody, `"delta":"a"`},
		{"/v1/messages", messagesStreamBody, `"text":"a"`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			sc := &script{chunks: []llm.Chunk{{Content: "a"}}, err: context.Canceled}
			w := httptest.NewRecorder()
			l := relayOnce(t, w, sc, tc.path, tc.body)
			body := strings.TrimSpace(w.Body.String())
			last := body[strings.LastIndex(body, "\n\n")+1:]
			if l.Status != 499 || !l.ClientDisconnect || !strings.Contains(last, tc.last) {
				t.Errorf("logged %+v, want a 499; the answer ends with %q, want the chunk's event", l, last)
			}
		})
	}
}

// TestRelayNativeTerminal: a backend's own stream is over at its terminal event; what the
// stream would still yield is not read, and nothing of the gateway's is written after it.
func TestRelayNativeTerminal(t *testing.T) {
	cases := []struct {
		path, body string
		chunks     []llm.Chunk
		last       string
	}{
		{"/v1/messages", messagesStreamBody, nativeChunks(llm.FormatMessages,
			"message_start", `{"type":"message_start"}`, "message_stop", `{"type":"message_stop"}`, "ping", `{"type":"ping"}`),
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"},
		{"/v1/responses", responsesStreamBody, nativeChunks(llm.FormatResponses,
			"response.created", `{"sequence_number":0}`, "response.completed", `{"sequence_number":1}`, "response.in_progress", `{}`),
			"event: response.completed\ndata: {\"sequence_number\":1}\n\n"},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			sc := &script{chunks: tc.chunks}
			w := httptest.NewRecorder()
			l := relayOnce(t, w, sc, tc.path, tc.body)
			if !strings.HasSuffix(w.Body.String(), tc.last) || len(sc.chunks) != 1 || l.Status != 200 {
				t.Errorf("%d chunks left unread (want 1), logged %+v, body:\n%s", len(sc.chunks), l, w.Body)
			}
		})
	}
}
