package sse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// splitReader returns its chunks one Read at a time, so a test controls read boundaries.
type splitReader struct{ chunks []string }

func (s *splitReader) Read(p []byte) (int, error) {
	for len(s.chunks) > 0 && s.chunks[0] == "" {
		s.chunks = s.chunks[1:]
	}
	if len(s.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, s.chunks[0])
	s.chunks[0] = s.chunks[0][n:]
	return n, nil
}

// readAll reads events until the stream ends; it returns them and the ending error.
func readAll(r *Reader) ([]Event, error) {
	var out []Event
	for {
		ev, err := r.Next()
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return out, err
		}
		ev.Data = append([]byte(nil), ev.Data...) // valid only until the next call
		out = append(out, ev)
	}
}

func ev(typ, data, id string) Event { return Event{Type: typ, Data: []byte(data), ID: id} }

func sameEvents(a, b []Event) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Type != b[i].Type || a[i].ID != b[i].ID || !bytes.Equal(a[i].Data, b[i].Data) {
			return false
		}
	}
	return true
}

func TestReader(t *testing.T) {
	tests := []struct {
		name     string
		chunks   []string // successive reads
		want     []Event
		comments int
	}{
		{"LF", []string{"data: a\n\ndata: b\n\n"}, []Event{ev("", "a", ""), ev("", "b", "")}, 0},
		{"CRLF", []string{"data: a\r\n\r\ndata: b\r\n\r\n"}, []Event{ev("", "a", ""), ev("", "b", "")}, 0},
		{"lone CR", []string{"data: a\r\rdata: b\r\r"}, []Event{ev("", "a", ""), ev("", "b", "")}, 0},
		{"CR then LF in next read", []string{"data: a\r", "\n\r", "\ndata: b\r\n\r\n"}, []Event{ev("", "a", ""), ev("", "b", "")}, 0},
		{"CR at end of read then blank CR", []string{"data: a\r", "\r"}, []Event{ev("", "a", "")}, 0},
		{"mixed terminators", []string{"data: a\ndata: b\r\n\rdata: c\r\r\n"}, []Event{ev("", "a\nb", ""), ev("", "c", "")}, 0},
		{"multi-line data", []string{"data: one\ndata: two\ndata:\ndata: three\n\n"}, []Event{ev("", "one\ntwo\n\nthree", "")}, 0},
		{"comments skipped and counted", []string{": keep-alive\n\n:HTTP_STATUS/200\ndata: x\n: mid\n\n"}, []Event{ev("", "x", "")}, 3},
		{"BOM stripped once", []string{"\xEF\xBB\xBFdata: a\n\n"}, []Event{ev("", "a", "")}, 0},
		{"BOM split across reads", []string{"\xEF", "\xBB", "\xBFdata: a\n\n"}, []Event{ev("", "a", "")}, 0},
		{"second BOM kept", []string{"\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\n"}, nil, 0},
		{"not a BOM", []string{"\xEFdata: a\n\ndata: b\n\n"}, []Event{ev("", "b", "")}, 0},
		{"missing final blank line dropped", []string{"data: a\n\ndata: b\n"}, []Event{ev("", "a", "")}, 0},
		{"unterminated last line dropped", []string{"data: a\n\ndata: b"}, []Event{ev("", "a", "")}, 0},
		{"data with no space", []string{"data:{\"a\":1}\n\n"}, []Event{ev("", `{"a":1}`, "")}, 0},
		{"only one space removed", []string{"data:  two\n\n"}, []Event{ev("", " two", "")}, 0},
		{"colon in value kept", []string{"data: a: b\n\n"}, []Event{ev("", "a: b", "")}, 0},
		{"field without colon", []string{"data\n\n"}, []Event{ev("", "", "")}, 0},
		{"empty data dispatches", []string{"data:\n\n"}, []Event{ev("", "", "")}, 0},
		{"no data no event", []string{"event: x\n\ndata: a\n\n"}, []Event{ev("", "a", "")}, 0},
		{"event type", []string{"event: message_start\ndata: {}\n\n"}, []Event{ev("message_start", "{}", "")}, 0},
		{"event type resets", []string{"event: e\ndata: 1\n\ndata: 2\n\n"}, []Event{ev("e", "1", ""), ev("", "2", "")}, 0},
		{"id persists", []string{"id: 7\ndata: a\n\ndata: b\n\nid\ndata: c\n\n"}, []Event{ev("", "a", "7"), ev("", "b", "7"), ev("", "c", "")}, 0},
		{"id with NUL ignored", []string{"id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n"}, []Event{ev("", "a", "1"), ev("", "b", "1")}, 0},
		{"retry and unknown fields ignored", []string{"retry: 100\nfoo: bar\ndata : no\ndata: yes\n\n"}, []Event{ev("", "yes", "")}, 0},
		{"dashscope native frame", []string{"id:1\nevent:result\n:HTTP_STATUS/200\ndata:{\"x\":1}\n\n"}, []Event{ev("result", `{"x":1}`, "1")}, 1},
		{"UTF-8 split across reads", []string{"data: \xe4\xbd", "\xa0\xe5", "\xa5\xbd\n\n"}, []Event{ev("", "你好", "")}, 0},
		{"empty stream", nil, nil, 0},
		{"blank lines only", []string{"\n\n\r\n\r"}, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(&splitReader{chunks: append([]string(nil), tt.chunks...)})
			got, err := readAll(r)
			if err != nil {
				t.Fatal(err)
			}
			if !sameEvents(got, tt.want) {
				t.Errorf("events = %q, want %q", got, tt.want)
			}
			if r.Comments != tt.comments {
				t.Errorf("Comments = %d, want %d", r.Comments, tt.comments)
			}
			// The same bytes one at a time give the same events.
			one := NewReader(iotest.OneByteReader(strings.NewReader(strings.Join(tt.chunks, ""))))
			if got1, err := readAll(one); err != nil || !sameEvents(got1, tt.want) {
				t.Errorf("one byte at a time: %q, %v", got1, err)
			}
		})
	}
}

func TestReaderErrors(t *testing.T) {
	boom := errors.New("connection reset")
	r := NewReader(io.MultiReader(strings.NewReader("data: a\n\ndata: b"), iotest.ErrReader(boom)))
	if e, err := r.Next(); err != nil || string(e.Data) != "a" {
		t.Fatalf("first event = %q, %v", e.Data, err)
	}
	if _, err := r.Next(); !errors.Is(err, boom) {
		t.Fatalf("after a read error: %v, want %v", err, boom)
	}

	long := "data: " + strings.Repeat("x", DefaultMaxEvent) + "\n\n"
	if _, err := NewReader(strings.NewReader(long)).Next(); !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("overlong line: %v, want ErrEventTooLarge", err)
	}
	big := "data: " + strings.Repeat("y", 1<<20) + "\n\n" // far above bufio.Scanner's 64 KiB
	if e, err := NewReader(strings.NewReader(big)).Next(); err != nil || len(e.Data) != 1<<20 {
		t.Fatalf("1 MiB line: %d bytes, %v", len(e.Data), err)
	}
}

// TestReaderEventLimit: the limit counts every line of an event, is reset by the blank line
// that ends it, and refuses the first byte over it, wherever the reads cut the stream.
func TestReaderEventLimit(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		limit int
		want  []Event // the events before the error, if any
		over  bool    // the stream ends with ErrEventTooLarge
	}{
		{"exactly at the limit", "data:abcd\n\n", 9, []Event{ev("", "abcd", "")}, false},
		{"one byte over", "data:abcde\n\n", 9, nil, true},
		{"lines add up", "data:ab\ndata:cd\n\n", 13, nil, true},
		{"lines add up to the limit", "data:ab\ndata:cd\n\n", 14, []Event{ev("", "ab\ncd", "")}, false},
		{"blank line resets", "data:abcd\n\ndata:efgh\n\n", 9, []Event{ev("", "abcd", ""), ev("", "efgh", "")}, false},
		{"comments count", ": ping\ndata:ab\n\n", 10, nil, true},
		{"comment blocks reset", ": ping\n\n: ping\n\ndata:ab\n\n", 7, []Event{ev("", "ab", "")}, false},
		{"endless data without a blank line", "data: a\n" + strings.Repeat("data: aaaaaaaaaa\n", 100), 64, nil, true},
		{"endless line", "data: " + strings.Repeat("a", 1000), 64, nil, true},
		{"events before the big one", "data: a\n\ndata: " + strings.Repeat("b", 100) + "\n\n", 64, []Event{ev("", "a", "")}, true},
		{"zero means the default", "data: " + strings.Repeat("c", 1000) + "\n\n", 0, []Event{ev("", strings.Repeat("c", 1000), "")}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for name, rd := range map[string]io.Reader{
				"whole":    strings.NewReader(tt.in),
				"one byte": iotest.OneByteReader(strings.NewReader(tt.in)),
			} {
				got, err := readAll(NewReaderLimit(rd, tt.limit))
				if tt.over != errors.Is(err, ErrEventTooLarge) || (!tt.over && err != nil) {
					t.Errorf("%s: error %v, want over=%v", name, err, tt.over)
				}
				if !sameEvents(got, tt.want) {
					t.Errorf("%s: events %q, want %q", name, got, tt.want)
				}
			}
		})
	}
}

// TestReaderEventLimitMemory: a backend that never ends its event costs the Reader at most
// about twice the limit, however much it sends.
func TestReaderEventLimitMemory(t *testing.T) {
	const limit = 64 << 10
	endless := io.MultiReader(strings.NewReader("data: x\n"), &repeatReader{line: []byte("data: " + strings.Repeat("y", 1000) + "\n")})
	r := NewReaderLimit(endless, limit)
	if _, err := r.Next(); !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("endless event: %v, want ErrEventTooLarge", err)
	}
	if held := cap(r.data) + cap(r.line); held > 2*limit+2*BufferSize {
		t.Fatalf("the Reader holds %d bytes for a %d-byte limit", held, limit)
	}
}

// repeatReader repeats line forever.
type repeatReader struct {
	line []byte
	off  int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], r.line[r.off:])
		n += c
		r.off = (r.off + c) % len(r.line)
	}
	return n, nil
}
