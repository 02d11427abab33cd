package httpapi

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// limits bounds the time a request's body may take to arrive (see timedBody), then refuses,
// before routing, a request whose framing or size the gateway does not accept. Each refusal
// is answered in SPEC §4's shape, closes the connection and leaves a log line.
//
// The bound comes first and covers every request with a body, because a handler that
// answers without reading the body (a refusal, a 401, a 404) leaves the server to read up to
// 256 KiB of it before it reuses or closes the connection: without a deadline, a body that
// never ends would hold the connection forever.
func (s *Server) limits(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.opts.BodyTimeout > 0 && r.Body != nil && r.Body != http.NoBody {
			r.Body = newTimedBody(w, r.Body, s.opts.BodyTimeout)
		}
		if s.refused(w, r) || s.foreign(w, r) {
			return
		}
		next.ServeHTTP(w, r)
	})
}

// refused refuses a request whose framing or size the gateway does not accept, and says
// whether it did. It is apart from the handler above so that its answers are not in a frame
// that stays below every call on the HTTP server's connection goroutine (docs/benchmarks.md).
func (s *Server) refused(w http.ResponseWriter, r *http.Request) bool {
	if max := s.opts.MaxHeaderBytes; max > 0 {
		if n := headerBytes(r); n > max {
			s.refuse(w, r, apiError{status: http.StatusRequestHeaderFieldsTooLarge, code: "request_header_too_large",
				typ:     "invalid_request_error",
				message: fmt.Sprintf("the request line and headers are %d bytes, over the limit of %d (max_header_bytes)", n, max)})
			return true
		}
	}
	if len(r.TransferEncoding) > 0 {
		// Go's server drops a Content-Length sent with Transfer-Encoding and reads on: a
		// proxy in front that framed the request by Content-Length would then see its
		// next request smuggled in. A handler cannot tell whether Content-Length came
		// too (it is gone), so every Transfer-Encoding is refused; clients send JSON
		// bodies with Content-Length (every OpenAI and Anthropic SDK does).
		a := invalid("Transfer-Encoding", "Transfer-Encoding is not accepted on requests: send the body with a Content-Length header")
		s.refuse(w, r, a)
		return true
	}
	return false
}

// refuse answers a request the limits turned away and closes its connection: whatever the
// client sends next on it cannot be trusted to start where the server thinks. Nothing more of
// it is read (the read deadline is now), so the connection closes as soon as the answer is out.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, a apiError) {
	a.closeConn = true
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
	if strings.HasPrefix(r.URL.Path, "/v1/") {
		w.Header().Set("X-Gateway-Queue-Ms", "0") // SPEC §3: every API answer carries it
	}
	fail := failOpenAI
	if strings.HasPrefix(r.URL.Path, "/v1/messages") {
		fail = failMessages // in the shape the route's API answers in (SPEC §13)
	}
	fail(w, a)
	// The access log's line (access.go), which no route writes for a request refused before
	// routing, with the client's address and the reason added.
	s.opts.Logger.Info().Str("request_id", requestID(r.Context())).Str("method", r.Method).
		Str("path", clip(r.URL.Path, 200)).Str("remote", r.RemoteAddr).Int("status", a.status).
		Str("code", a.code).Str("refused", a.message).Msg("http")
}

// headerBytes is the size of a request's line and headers as sent, near enough: the server
// has already taken Host, Transfer-Encoding and (with it) Content-Length out of Header.
func headerBytes(r *http.Request) int {
	n := len(r.Method) + 1 + len(r.RequestURI) + 1 + len(r.Proto) + 2
	if r.Host != "" {
		n += len("Host: ") + len(r.Host) + 2
	}
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + 2 + len(v) + 2
		}
	}
	return n + 2 // the blank line
}

// readBody reads a request body within the size and time limits; a failure is the client's
// answer.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *apiError) {
	body, err := readAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes), r.ContentLength, s.opts.MaxBodyBytes)
	if err == nil {
		return body, nil
	}
	var tooBig *http.MaxBytesError
	var slow *bodyTimeoutError
	switch {
	case errors.As(err, &tooBig):
		return nil, &apiError{status: http.StatusRequestEntityTooLarge, code: "request_too_large",
			typ:     "invalid_request_error",
			message: fmt.Sprintf("request body is larger than the limit of %d bytes (max_body_bytes)", tooBig.Limit)}
	case errors.As(err, &slow):
		// 408, which the SDKs retry: on a fresh connection a slow network may do better.
		return nil, &apiError{status: http.StatusRequestTimeout, code: "request_timeout", typ: "invalid_request_error",
			message: slow.Error(), closeConn: true}
	}
	a := invalid("", "could not read the request body: "+err.Error())
	return nil, &a
}

// readAll is io.ReadAll into a buffer of the size the request declares (Content-Length), when
// it declares one within limit: a coding agent's body is megabytes, and io.ReadAll's growing
// buffer would allocate about three times that, half of it still garbage when the body is in.
func readAll(r io.Reader, declared, limit int64) ([]byte, error) {
	if declared <= 0 || declared > limit {
		return io.ReadAll(r)
	}
	// One byte more than declared, so that the read that finds the end has room; should a
	// reader give more than declared, append grows the buffer as io.ReadAll would.
	b := make([]byte, 0, declared+1)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

// timedBody bounds the time a request body takes to arrive: the connection's read deadline
// is set when the handler starts, and a read it cuts off says so. The server lifts the
// deadline itself once the body has been read, when it starts watching the connection for
// a client that leaves, so an answer that takes longer is not cut (TestBodyDeadlineEndsWithTheBody).
type timedBody struct {
	io.ReadCloser
	limit time.Duration
}

// newTimedBody returns body bounded by limit, or body itself when w cannot set deadlines
// (a test's recorder).
func newTimedBody(w http.ResponseWriter, body io.ReadCloser, limit time.Duration) io.ReadCloser {
	if http.NewResponseController(w).SetReadDeadline(time.Now().Add(limit)) != nil {
		return body
	}
	return &timedBody{ReadCloser: body, limit: limit}
}

func (b *timedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		err = &bodyTimeoutError{limit: b.limit}
	}
	return n, err
}

// bodyTimeoutError is a body read cut off by BodyTimeout.
type bodyTimeoutError struct{ limit time.Duration }

func (e *bodyTimeoutError) Error() string {
	return fmt.Sprintf("the request body did not arrive within %s (body_timeout)", e.limit)
}
