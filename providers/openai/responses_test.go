package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/sse"
	"github.com/tollgate/tollgate/providers/upstream"
)

func responsesReq(stream bool, body string) *llm.Request {
	return &llm.Request{Model: "gpt-x", Stream: stream, Messages: []llm.Message{{Role: "user", Content: llm.Content{Text: "hi"}}},
		Native: &llm.Native{Format: llm.FormatResponses, Body: []byte(body)}}
}

const responsesSSE = "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"r\",\"object\":\"response\",\"status\":\"in_progress\",\"output\":[]}}\n\n" +
	"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":1,\"item_id\":\"m\",\"output_index\":0,\"content_index\":0,\"delta\":\"Hi\"}\n\n" +
	"event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":2,\"response\":{\"id\":\"r\",\"object\":\"response\",\"status\":\"completed\",\"output\":[],\"usage\":{\"input_tokens\":5,\"input_tokens_details\":{\"cached_tokens\":2},\"output_tokens\":1,\"output_tokens_details\":{\"reasoning_tokens\":0},\"total_tokens\":6}}}\n\n"

// TestResponsesNative: an OpenAI backend gets a Responses request at /responses as sent with
// the model replaced, and its events come back as sent with the usage decoded; backends of
// other kinds get the chat translation at /chat/completions.
func TestResponsesNative(t *testing.T) {
	const body = `{"model":"gpt-5-codex","input":"hi","stream":true,"include":["reasoning.encrypted_content"]}`
	var path, got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		path, got = r.URL.Path, string(b)
		w.Header().Set("Content-Type", "text/event-stream")
		if r.URL.Path == "/responses" {
			io.WriteString(w, responsesSSE)
			return
		}
		io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: [DONE]\n\n")
	}))
	defer srv.Close()

	s, err := newTestClient(t, KindOpenAI, srv.URL).Open(context.Background(), responsesReq(true, body))
	if err != nil {
		t.Fatal(err)
	}
	var relayed strings.Builder
	var usage *llm.Usage
	for {
		ch, err := s.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if ch.Format != llm.FormatResponses {
			t.Fatalf("chunk %+v is not a Responses event", ch)
		}
		relayed.WriteString("event: " + ch.Event + "\ndata: " + string(ch.Raw) + "\n\n")
		if ch.Usage != nil {
			usage = ch.Usage
		}
	}
	s.Close()
	if path != "/responses" || got != strings.Replace(body, "gpt-5-codex", "gpt-x", 1) {
		t.Errorf("backend got %s %s", path, got)
	}
	if relayed.String() != responsesSSE || usage == nil || usage.TotalTokens != 6 || usage.CachedTokens != 2 {
		t.Errorf("relayed %q, usage %+v", relayed.String(), usage)
	}

	s, err = newTestClient(t, KindDeepSeek, srv.URL).Open(context.Background(), responsesReq(true, body))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if path != "/chat/completions" || !strings.Contains(got, `"messages"`) {
		t.Errorf("a deepseek backend got %s %s; want the chat translation", path, got)
	}
}

// TestResponsesNativeErrors: response.failed as the first event, an error event, and a stream
// cut off after its first event come back from Open as classified errors.
func TestResponsesNativeErrors(t *testing.T) {
	for _, tc := range []struct {
		name, sse string
		kind      llm.Kind
	}{
		{"failed", "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"object\":\"response\",\"status\":\"in_progress\"}}\n\n" +
			"event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"object\":\"response\",\"status\":\"failed\",\"error\":{\"code\":\"rate_limit_exceeded\",\"message\":\"slow\"}}}\n\n",
			llm.KindUpstreamRateLimited},
		{"error", "event: error\ndata: {\"type\":\"error\",\"code\":\"insufficient_quota\",\"message\":\"no money\"}\n\n", llm.KindUpstreamQuota},
		// Cut off after it began: a truncated answer, never a complete one.
		{"cut", "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"object\":\"response\",\"status\":\"in_progress\"}}\n\n", llm.KindUpstreamTruncated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, tc.sse)
			}))
			defer srv.Close()
			_, err := newTestClient(t, KindOpenAI, srv.URL).Open(context.Background(), responsesReq(true, `{"model":"m","input":"hi","stream":true}`))
			if llm.KindOf(err) != tc.kind || err == nil {
				t.Fatalf("err %v (kind %v), want %v", err, llm.KindOf(err), tc.kind)
			}
		})
	}
}

// FuzzResponsesStream feeds arbitrary bytes to the Responses event relay: it never panics,
// always ends, and yields only events as sent (JSON, in the Responses format), ending
// cleanly only after a terminal event.
func FuzzResponsesStream(f *testing.F) {
	f.Add([]byte(responsesSSE))
	f.Add([]byte("data: {\"type\":\"error\",\"code\":\"rate_limit_exceeded\"}\n\n"))
	f.Add([]byte("data: {\"type\":\"response.incomplete\",\"response\":{\"status\":\"incomplete\"}}\n\n"))
	c := newTestClient(f, KindOpenAI, "http://127.0.0.1:1")
	f.Fuzz(func(t *testing.T, data []byte) {
		src := &responsesEvents{c: c, ctx: context.Background(), r: sse.NewReader(bytes.NewReader(data))}
		s := upstream.NewChunkStream("oai", io.NopCloser(bytes.NewReader(nil)), nil, src)
		defer s.Close()
		for i := 0; ; i++ {
			if i > len(data)+10 {
				t.Fatal("more chunks than input bytes")
			}
			ch, err := s.Next()
			if err == io.EOF {
				if !src.done {
					t.Fatal("io.EOF before a terminal event")
				}
				return
			}
			if err != nil {
				return
			}
			if ch.Format != llm.FormatResponses || !json.Valid(ch.Raw) {
				t.Fatalf("chunk %+v is not a native event", ch)
			}
		}
	})
}
