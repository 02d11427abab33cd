package sse

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestWriter(t *testing.T) {
	tests := []struct {
		name  string
		write func(w *Writer) error
		want  string
	}{
		{"data", func(w *Writer) error { return w.Data([]byte(`{"a":1}`)) }, "data: {\"a\":1}\n\n"},
		{"named event", func(w *Writer) error { return w.Event("message_stop", []byte(`{}`)) }, "event: message_stop\ndata: {}\n\n"},
		{"multi-line data", func(w *Writer) error { return w.Data([]byte("a\nb\r\nc\rd")) }, "data: a\ndata: b\ndata: c\ndata: d\n\n"},
		{"trailing newline", func(w *Writer) error { return w.Data([]byte("a\n")) }, "data: a\ndata: \n\n"},
		{"empty data", func(w *Writer) error { return w.Data(nil) }, "data: \n\n"},
		{"comment", func(w *Writer) error { return w.Comment("keep-alive") }, ": keep-alive\n\n"},
		{"comment cannot inject", func(w *Writer) error { return w.Comment("x\ndata: evil\r\n") }, ": x data: evil \n\n"},
		{"name cannot inject", func(w *Writer) error { return w.Event("a\rdata: b", []byte("c")) }, "event: a data: b\ndata: c\n\n"},
		{"two events", func(w *Writer) error {
			if err := w.Data([]byte("1")); err != nil {
				return err
			}
			return w.Data([]byte("2"))
		}, "data: 1\n\ndata: 2\n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			if err := tt.write(NewWriter(&b)); err != nil {
				t.Fatal(err)
			}
			if b.String() != tt.want {
				t.Errorf("wrote %q, want %q", b.String(), tt.want)
			}
		})
	}
}

// countingRecorder counts flushes and the writes each one follows.
type countingRecorder struct {
	*httptest.ResponseRecorder
	writes, flushes int
}

func (c *countingRecorder) Write(p []byte) (int, error) {
	c.writes++
	return c.ResponseRecorder.Write(p)
}
func (c *countingRecorder) Flush() { c.flushes++; c.ResponseRecorder.Flush() }

func TestWriterFlushesEachEventInOneWrite(t *testing.T) {
	rec := &countingRecorder{ResponseRecorder: httptest.NewRecorder()}
	SetHeaders(rec.Header())
	w := NewWriter(rec)
	_ = w.Event("e", []byte("a\nb"))
	_ = w.Comment("ping")
	_ = w.Data([]byte("x"))
	if rec.writes != 3 || rec.flushes != 3 {
		t.Errorf("3 events: %d writes, %d flushes; want 3 and 3", rec.writes, rec.flushes)
	}
	h := rec.Header()
	if h.Get("Content-Type") != "text/event-stream" || h.Get("Cache-Control") != "no-cache" || h.Get("X-Accel-Buffering") != "no" {
		t.Errorf("headers = %v", h)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

func TestWriterReportsErrors(t *testing.T) {
	w := NewWriter(failWriter{})
	if err := w.Data([]byte("x")); err == nil {
		t.Error("Data on a broken writer returned nil")
	}
	if err := w.Comment("x"); err == nil {
		t.Error("Comment on a broken writer returned nil")
	}
}

var _ http.Flusher = (*countingRecorder)(nil)
