// Package statuswriter notes the status an HTTP handler answered with, for the taps the
// end-to-end tests and the load harness put in front of a handler to see what it answered.
package statuswriter

import "net/http"

// Writer is an http.ResponseWriter that remembers the first status written (200 when the
// body is written first). It passes Flush on, which streams need, and Unwrap lets
// http.ResponseController reach the connection's writer (deadlines, flushes) as it would
// without the tap.
type Writer struct {
	http.ResponseWriter
	status int
}

// New wraps w.
func New(w http.ResponseWriter) *Writer { return &Writer{ResponseWriter: w} }

// Status is the status answered so far; 0 before anything was written.
func (w *Writer) Status() int { return w.status }

func (w *Writer) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *Writer) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *Writer) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *Writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }
