package sse

import (
	"io"
	"strings"
	"testing"
)

// chunkedReader hands out its parts one Read at a time, as network reads arrive.
type chunkedReader struct{ parts []string }

func (c *chunkedReader) Read(p []byte) (int, error) {
	if len(c.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.parts[0])
	c.parts[0] = c.parts[0][n:]
	if c.parts[0] == "" {
		c.parts = c.parts[1:]
	}
	return n, nil
}

func TestReady(t *testing.T) {
	cases := []struct {
		name  string
		parts []string
		want  bool // Ready after the first event was read
	}{
		{"next event whole", []string{"data: a\n\ndata: b\n\n"}, true},
		{"next event partial", []string{"data: a\n\ndata: b\n"}, false},
		{"next line partial", []string{"data: a\n\ndata: b"}, false},
		{"next read not arrived", []string{"data: a\n\n", "data: b\n\n"}, false},
		{"only a comment buffered", []string{"data: a\n\n: keep-alive\n\n"}, false},
		{"comment then event", []string{"data: a\n\n: keep-alive\n\ndata: b\n\n"}, true},
		{"CRLF", []string{"data: a\r\n\r\ndata: b\r\n\r\n"}, true},
		{"lone CR", []string{"data: a\r\rdata: b\r\r"}, true},
		{"event without data", []string{"data: a\n\nevent: x\n\n"}, false},
		{"data with no value", []string{"data: a\n\ndata\n\n"}, true},
		{"field named database", []string{"data: a\n\ndatabase: 1\n\n"}, false},
	}
	for _, tc := range cases {
		r := NewReader(&chunkedReader{parts: append([]string(nil), tc.parts...)})
		if _, err := r.Next(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := r.Ready(); got != tc.want {
			t.Errorf("%s: Ready %v, want %v", tc.name, got, tc.want)
		}
		if tc.want {
			// Ready promised an event: Next must return one without another read.
			if ev, err := r.Next(); err != nil || ev.Data == nil {
				t.Errorf("%s: Next after Ready: %q %v", tc.name, ev.Data, err)
			}
		}
	}
	if NewReader(strings.NewReader("")).Ready() {
		t.Error("empty reader is ready")
	}
}
