package sse

import (
	"io"
	"net/http"
)

// Writer writes events and flushes after each one, so a client sees every event as soon as it
// is written. Each event is written with a single Write call: a failing connection can cut it
// short, but the Writer never interleaves or splits events itself.
type Writer struct {
	w   io.Writer
	rc  *http.ResponseController // nil when w is not an http.ResponseWriter
	buf []byte
}

// NewWriter returns a Writer on w. When w is an http.ResponseWriter every event is flushed.
func NewWriter(w io.Writer) *Writer {
	sw := &Writer{w: w}
	if rw, ok := w.(http.ResponseWriter); ok {
		sw.rc = http.NewResponseController(rw)
	}
	return sw
}

// SetHeaders sets the response headers an SSE stream needs.
func SetHeaders(h http.Header) {
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
}

// Data writes an event with no name; data containing line breaks becomes several data lines.
func (w *Writer) Data(data []byte) error { return w.Event("", data) }

// Event writes an event with the given name (none when empty; line breaks in it become
// spaces) and data.
func (w *Writer) Event(name string, data []byte) error {
	b := w.buf[:0]
	if name != "" {
		b = append(b, "event: "...)
		b = appendOneLine(b, name)
		b = append(b, '\n')
	}
	for {
		i := lineEnd(data)
		if i < 0 {
			break
		}
		b = append(b, "data: "...)
		b = append(b, data[:i]...)
		b = append(b, '\n')
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
	b = append(b, "data: "...)
	b = append(b, data...)
	b = append(b, '\n', '\n')
	w.buf = b
	return w.write(b)
}

// Comment writes a comment line, which clients ignore; used as a keep-alive. Line breaks in
// text become spaces: they would otherwise end the comment and start real fields.
func (w *Writer) Comment(text string) error {
	b := append(w.buf[:0], ": "...)
	b = appendOneLine(b, text)
	b = append(b, '\n', '\n')
	w.buf = b
	return w.write(b)
}

func (w *Writer) write(b []byte) error {
	if _, err := w.w.Write(b); err != nil {
		return err
	}
	if w.rc != nil {
		return w.rc.Flush()
	}
	return nil
}

// appendOneLine appends s with each line break (CRLF, CR or LF) replaced by a space, so a
// value can never add lines (and so fields or events) to the stream.
func appendOneLine(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\r':
			if i+1 < len(s) && s[i+1] == '\n' {
				i++
			}
			b = append(b, ' ')
		case '\n':
			b = append(b, ' ')
		default:
			b = append(b, c)
		}
	}
	return b
}
