package openai

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/providers/llm"
)

// TestRequestGolden: an llm.Request in (testdata/openai/<kind>/<case>.in.json), the exact body
// the backend receives out (<case>.sent.json).
//
// The input holds the backend model name, the client's JSON body, and whether the request
// keeps that body (as the HTTP layer does) or was built in code (Body nil).
func TestRequestGolden(t *testing.T) {
	for _, in := range caseFiles(t, "*.in.json") {
		kind := filepath.Base(filepath.Dir(in))
		name := kind + "/" + strings.TrimSuffix(filepath.Base(in), ".in.json")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			var tc struct {
				Model   string          `json:"model"`
				UseBody bool            `json:"use_body"`
				Client  json.RawMessage `json:"client"`
			}
			if err := json.Unmarshal(raw, &tc); err != nil {
				t.Fatal(err)
			}
			var req llm.Request
			if err := json.Unmarshal(tc.Client, &req); err != nil {
				t.Fatal(err)
			}
			req.Model = tc.Model
			if tc.UseBody {
				req.Body = tc.Client
			}
			got := make(chan []byte, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				if r.URL.Path != "/v1/chat/completions" || r.ContentLength != int64(len(b)) {
					t.Errorf("backend got %s with Content-Length %d for %d bytes", r.URL.Path, r.ContentLength, len(b))
				}
				got <- b
				http.Error(w, `{"error":{"message":"stop here","code":"invalid_request_error"}}`, http.StatusBadRequest)
			}))
			defer srv.Close()
			c := newTestClient(t, kind, srv.URL+"/v1", "sk-test")
			if _, err := c.Open(context.Background(), &req); err == nil {
				t.Fatal("Open succeeded against a backend answering 400")
			}
			body := <-got
			if !json.Valid(body) {
				t.Fatalf("backend got invalid JSON: %s", body)
			}
			checkGolden(t, trimExt(in, ".in.json")+".sent.json", append(body, '\n'))
		})
	}
}

// TestResponseGolden: a backend's raw HTTP answer in (testdata/openai/<kind>/<case>.http), what
// the Stream hands the gateway out (<case>.golden.jsonl). Cases named stream_* are stream
// requests. The answer is written in 5-byte flushed pieces so every frame is read in parts.
func TestResponseGolden(t *testing.T) {
	for _, in := range caseFiles(t, "*.http") {
		kind := filepath.Base(filepath.Dir(in))
		base := strings.TrimSuffix(filepath.Base(in), ".http")
		t.Run(kind+"/"+base, func(t *testing.T) {
			status, h, body := readHTTPFixture(t, in)
			srv := replayServer(t, status, h, body, 5)
			c := newTestClient(t, kind, srv.URL, "sk-test-secret")
			req := &llm.Request{Model: "m", Messages: []llm.Message{{Role: "user", Content: llm.Content{Text: "hi"}}},
				Stream: strings.HasPrefix(base, "stream_")}
			events := collect(t, c, req)
			checkGolden(t, trimExt(in, ".http")+".golden.jsonl", encodeLines(t, events))
		})
	}
}

// collect runs one call and records everything the gateway would see.
func collect(t *testing.T, c *Client, req *llm.Request) []goldenEvent {
	t.Helper()
	s, err := c.Open(context.Background(), req)
	if err != nil {
		return []goldenEvent{{OpenError: toGoldenError(t, err)}}
	}
	defer s.Close()
	var out []goldenEvent
	for i := 0; ; i++ {
		if i > 1000 {
			t.Fatal("stream does not end")
		}
		ch, err := s.Next()
		if err == io.EOF {
			return append(out, goldenEvent{EOF: true})
		}
		if err != nil {
			return append(out, goldenEvent{Error: toGoldenError(t, err)})
		}
		if !json.Valid(ch.Raw) {
			t.Fatalf("chunk %d is not valid JSON: %q", i, ch.Raw)
		}
		out = append(out, goldenEvent{Chunk: toGoldenChunk(ch)})
	}
}
