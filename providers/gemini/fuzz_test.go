package gemini

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/tollgate/tollgate/providers/sse"
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
		s := &stream{ctx: context.Background(), provider: "gemini", body: io.NopCloser(bytes.NewReader(data)),
			events: sse.NewReader(bytes.NewReader(data)), dec: dec}
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
