package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/upstream"
)

// nativeReq is a request that came in as Messages, for backend model "claude-x".
func nativeReq(stream bool, body string) *llm.Request {
	return &llm.Request{Model: "claude-x", Stream: stream, Messages: []llm.Message{{Role: "user", Content: llm.Content{Text: "hi"}}},
		Native: &llm.Native{Format: llm.FormatMessages, Body: []byte(body),
			Header: map[string]string{"Anthropic-Beta": "interleaved-thinking-2025-05-14", "Anthropic-Version": "2023-06-01"}}}
}

// TestNativeStream: the client's body reaches the backend with only the model replaced and
// its beta header; every event comes back as sent, also decoded for usage and finish.
func TestNativeStream(t *testing.T) {
	const body = `{"model":"claude-sonnet-4-5","max_tokens":64,"stream":true,"cache_control":{"type":"ephemeral"},"messages":[{"role":"user","content":"hi"}]}`
	var got []byte
	var beta string
	c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
		beta = r.Header.Get("anthropic-beta")
		writeSSE(t, w, "tool_use.sse")
	}, nil)
	s, err := c.Open(context.Background(), nativeReq(true, body))
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := collect(t, s)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(body, `"claude-sonnet-4-5"`, `"claude-x"`, 1)
	if string(got) != want || beta != "interleaved-thinking-2025-05-14" {
		t.Errorf("backend got %s with beta %q; want %s", got, beta, want)
	}
	raw, _ := os.ReadFile(testdata + "/stream/tool_use.sse")
	var relayed strings.Builder
	var usage *llm.Usage
	var finish llm.FinishReason
	for _, ch := range chunks {
		if ch.Format != llm.FormatMessages || !json.Valid(ch.Raw) {
			t.Fatalf("chunk %+v is not a native event", ch)
		}
		relayed.WriteString("event: " + ch.Event + "\ndata: " + string(ch.Raw) + "\n\n")
		if ch.Usage != nil {
			usage = ch.Usage
		}
		if ch.FinishReason != "" {
			finish = ch.FinishReason
		}
	}
	if strings.TrimSpace(relayed.String()) != strings.TrimSpace(string(raw)) {
		t.Errorf("relayed events differ from the backend's:\n%s\nwant:\n%s", relayed.String(), raw)
	}
	if usage == nil || usage.CompletionTokens == 0 || finish != llm.FinishToolCalls {
		t.Errorf("usage %+v, finish %q", usage, finish)
	}
}

// TestNativeErrors: an overload right after message_start, and a 429, come back from Open
// classified as on the chat path.
func TestNativeErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    http.HandlerFunc
		kind llm.Kind
	}{
		{"overloaded-after-start", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("content-type", "text/event-stream")
			io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":1}}}\n\n"+
				"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n")
		}, llm.KindProviderUnavailable},
		{"429", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("retry-after", "3")
			w.WriteHeader(429)
			io.WriteString(w, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`)
		}, llm.KindUpstreamRateLimited},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestClient(t, tc.h, nil)
			_, err := c.Open(context.Background(), nativeReq(true, `{"model":"m","max_tokens":5,"stream":true,"messages":[]}`))
			if llm.KindOf(err) != tc.kind {
				t.Fatalf("err %v (kind %v), want %v", err, llm.KindOf(err), tc.kind)
			}
		})
	}
}

// TestNativeWhole: a non-streaming answer comes back as the backend's body, decoded for usage.
func TestNativeWhole(t *testing.T) {
	const answer = `{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}`
	c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, answer) }, nil)
	s, err := c.Open(context.Background(), nativeReq(false, `{"model":"m","max_tokens":5,"messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := collect(t, s)
	if err != nil || len(chunks) != 1 || !chunks[0].Complete || string(chunks[0].Raw) != answer || chunks[0].Usage.TotalTokens != 4 {
		t.Fatalf("chunks %+v, %v", chunks, err)
	}
}

// FuzzNativeStream feeds arbitrary bytes to the native event relay: it never panics, always
// ends, yields only events as sent (JSON, in the Messages format), and io.EOF only after
// message_stop.
func FuzzNativeStream(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(testdata, "stream", "*.sse"))
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("data: {\"type\":\"message_stop\"}\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := newDecoder(testErrorf)
		s := upstream.NewEventStream(context.Background(), "claude", io.NopCloser(bytes.NewReader(data)), nil, nativeDecoder{dec}, 0, "")
		defer s.Close()
		for i := 0; ; i++ {
			if i > len(data)+10 {
				t.Fatal("more chunks than input bytes")
			}
			ch, err := s.Next()
			if err == io.EOF {
				if !dec.done {
					t.Fatal("io.EOF before message_stop")
				}
				return
			}
			if err != nil {
				return
			}
			if ch.Format != llm.FormatMessages || !json.Valid(ch.Raw) {
				t.Fatalf("chunk %+v is not a native event", ch)
			}
		}
	})
}
