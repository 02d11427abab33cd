package openai

import (
	"net/http"
	"time"

	"github.com/tollgate/tollgate/providers/upstream"
)

// NewTransport returns upstream.NewTransport(connect, 0) with header as its ResponseHeaderTimeout,
// for callers that build their own client (a load generator's stand-in backend). The adapters
// do not use it: they bound the wait for headers per call, for streams only (upstream.Send).
func NewTransport(connect, header time.Duration) *http.Transport {
	t := upstream.NewTransport(connect, 0)
	t.ResponseHeaderTimeout = header
	return t
}
