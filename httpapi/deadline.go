package httpapi

import (
	"net/http"
	"time"
)

// deadlineWriter gives each write of an answer a deadline, so that a client that stops
// reading cannot hold its connection (and the memory behind it) forever: before a write or
// a flush, the connection's write deadline is moved WriteTimeout ahead. The answer as a
// whole has no deadline, since an LLM stream may run for minutes. The deadline moves at most
// once per deadlineStep, which keeps the cost off the per-chunk path; a write that makes no
// progress therefore ends the connection after WriteTimeout at most and WriteTimeout −
// deadlineStep at least. The call's lanes do not wait for any of this: they come back when
// the backend has stopped (actors' stream).
type deadlineWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	set     time.Time // when the deadline was last moved
}

// deadlineStep is how far apart two moves of the write deadline are at least.
const deadlineStep = time.Second

func (s *Server) writeDeadlines(w http.ResponseWriter) *deadlineWriter {
	return &deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w), timeout: s.opts.WriteTimeout}
}

func (d *deadlineWriter) arm() {
	now := time.Now()
	if now.Sub(d.set) < deadlineStep {
		return
	}
	d.set = now
	_ = d.rc.SetWriteDeadline(now.Add(d.timeout)) // an error means a writer without deadlines (tests): nothing to bound
}

func (d *deadlineWriter) Write(p []byte) (int, error) {
	d.arm()
	return d.ResponseWriter.Write(p)
}

// FlushError is what http.ResponseController.Flush calls.
func (d *deadlineWriter) FlushError() error {
	d.arm()
	return d.rc.Flush()
}

// Flush is for callers that use http.Flusher.
func (d *deadlineWriter) Flush() { _ = d.FlushError() }

// Unwrap lets http.ResponseController reach the connection behind.
func (d *deadlineWriter) Unwrap() http.ResponseWriter { return d.ResponseWriter }
