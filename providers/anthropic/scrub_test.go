package anthropic

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/tollgate/tollgate/providers/llm"
)

// TestBrokenStreamScrubsKey: a broken read whose error quotes the call's key (a proxy on the
// way echoing the request's headers) shows it in neither the error's message for the client
// nor its detail for the log.
func TestBrokenStreamScrubsKey(t *testing.T) {
	const key = "test-key-0123456789abcdef"
	body := io.NopCloser(iotest.ErrReader(errors.New("proxy: lost the backend of " + key)))
	_, err := newStream(t.Context(), "claude", body, nil, newDecoder(testErrorf), 0, key).Next()
	le, ok := errors.AsType[*llm.Error](err)
	if !ok || strings.Contains(le.Message, key) || strings.Contains(le.Detail, key) || !strings.Contains(le.Detail, "[redacted]") {
		t.Fatalf("Next = %#v; want an llm.Error with the key redacted from its message and detail", err)
	}
}
