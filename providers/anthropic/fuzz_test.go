package anthropic

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/providers/upstream"
)

// FuzzAnthropicStream feeds arbitrary bytes to the stream decoder: it must never panic and
// must always end, with io.EOF only after message_stop.
func FuzzAnthropicStream(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(testdata, "stream", "*.sse"))
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("event: message_stop\ndata: {}\n\n"))
	f.Add([]byte("data: {\"type\":\"content_block_delta\",\"index\":-1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"x\"}}\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := newDecoder(testErrorf)
		s := upstream.NewEventStream(context.Background(), "claude", io.NopCloser(bytes.NewReader(data)), nil, dec, 0, "")
		defer s.Close()
		for i := 0; ; i++ {
			if i > len(data)+10 {
				t.Fatal("more chunks than input bytes")
			}
			_, err := s.Next()
			if err == io.EOF {
				if !dec.done {
					t.Fatal("io.EOF before message_stop")
				}
				return
			}
			if err != nil {
				return
			}
		}
	})
}

// FuzzAnthropicBodies feeds arbitrary bytes to the non-streaming decoders: a whole answer and
// an error body. Neither may panic; an error body always yields a usable error.
func FuzzAnthropicBodies(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(testdata, "message", "*.response.json"))
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"type":"error","error":{"type":"rate_limit_error","message":"spend limit"}}`))
	f.Add([]byte(`{"content":[{"type":"tool_use","input":null}]}`))
	c, err := New(Config{Name: "claude"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if chunks, err := decodeMessage(data); err == nil && len(chunks) != 2 {
			t.Fatalf("decoded answer has %d chunks, want 2", len(chunks))
		}
		e := c.statusError(429, http.Header{"Retry-After": {"2"}}, data, "sk-secret")
		if e == nil || e.Message == "" || e.Provider != "claude" || strings.Contains(e.Message, "sk-secret") {
			t.Fatalf("statusError gave %#v", e)
		}
	})
}
