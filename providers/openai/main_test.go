package openai

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine started by a test outlives it (a stream's drain
// goroutine, a reader left blocked). Idle keep-alive connections of the pooled transports are
// expected to stay and are ignored.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
	)
}
