package openai

import (
	"io"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/providers/llm"
)

// TestStreamFinishReason: a chunk's finish reason is its JSON string as encoding/json decodes
// it, escapes and bytes that are not UTF-8 included, so a stream that ends after it without
// [DONE] ends cleanly rather than as cut off.
func TestStreamFinishReason(t *testing.T) {
	for _, tt := range []struct {
		value string
		want  llm.FinishReason
	}{
		{`"stop"`, "stop"},
		{`"st\u006fp"`, "stop"},
		{`"length\/x"`, "length/x"},
		{"\"stop\xff\"", "stop\ufffd"},
	} {
		c := &Client{kind: KindOpenAI, name: "t"}
		s := streamOver(c, strings.NewReader(`data: {"choices":[{"index":0,"delta":{},"finish_reason":`+tt.value+"}]}\n\n"))
		ch, err := s.Next()
		if err != nil || ch.FinishReason != tt.want {
			t.Errorf("finish_reason %s: %q, %v; want %q", tt.value, ch.FinishReason, err, tt.want)
		}
		if _, err := s.Next(); err != io.EOF {
			t.Errorf("finish_reason %s: the stream ends with %v, want io.EOF", tt.value, err)
		}
	}
}
