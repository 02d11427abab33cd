package gemini

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

// FuzzGeminiStream feeds arbitrary bytes to the stream decoder: it must never panic and must
// always end, with io.EOF only after a finish reason.
func FuzzGeminiStream(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(testdata, "stream", "*.sse"))
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("data: {\"candidates\":[{\"index\":-3,\"finishReason\":\"STOP\",\"content\":{\"parts\":[{\"functionCall\":{\"args\":null}}]}}]}\n\n"))
	f.Add([]byte("data: [{\"error\":{}}]\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := newDecoder(testErrorf)
		s := upstream.NewEventStream(context.Background(), "gemini", io.NopCloser(bytes.NewReader(data)), nil, dec, 0, "")
		defer s.Close()
		for i := 0; ; i++ {
			if i > len(data)+10 {
				t.Fatal("more chunks than input bytes")
			}
			_, err := s.Next()
			if err == io.EOF {
				if !dec.done {
					t.Fatal("io.EOF before a finish reason")
				}
				return
			}
			if err != nil {
				return
			}
		}
	})
}

// FuzzGeminiBodies feeds arbitrary bytes to the non-streaming decoders: a whole answer and an
// error body. Neither may panic; an error body always yields a usable error.
func FuzzGeminiBodies(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(testdata, "response", "*.response.json"))
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`[{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"retryDelay":"-1s"},{"violations":[{"quotaId":"PerDay"}]}]}}]`))
	f.Add([]byte(`{"error":{"message":"Please retry in 99999999999999999999s."}}`))
	c, err := New(Config{Name: "gemini"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = decodeResponse(data, testErrorf)
		e := c.statusError(429, http.Header{"Retry-After": {"2"}}, data, "secret-key")
		if e == nil || e.Message == "" || e.Provider != "gemini" || strings.Contains(e.Message, "secret-key") {
			t.Fatalf("statusError gave %#v", e)
		}
		if e.RetryAfter < 0 {
			t.Fatalf("negative RetryAfter %v", e.RetryAfter)
		}
	})
}
