package sse

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/iotest"
)

// referenceParse is the WHATWG algorithm written as plainly as possible over the whole input,
// to check the streaming Reader against. limit is the Reader's event size limit: over it,
// the events before and true are returned.
func referenceParse(in string, limit int) ([]Event, bool) {
	in = strings.TrimPrefix(in, "\uFEFF")
	var lines []string
	for {
		i := strings.IndexAny(in, "\r\n")
		if i < 0 {
			break // an unterminated last line is not a line
		}
		lines = append(lines, in[:i])
		if in[i] == '\r' && i+1 < len(in) && in[i+1] == '\n' {
			i++
		}
		in = in[i+1:]
	}
	var out []Event
	var data strings.Builder
	var typ, id string
	hasData := false
	size := 0 // the current event's bytes, counted as the Reader counts them
	for _, l := range lines {
		if size += len(l); size > limit {
			return out, true
		}
		if l == "" {
			size = 0
			if hasData {
				out = append(out, Event{Type: typ, Data: []byte(strings.TrimSuffix(data.String(), "\n")), ID: id})
			}
			data.Reset()
			typ, hasData = "", false
			continue
		}
		if l[0] == ':' {
			continue
		}
		field, value, _ := strings.Cut(l, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "data":
			data.WriteString(value + "\n")
			hasData = true
		case "event":
			typ = value
		case "id":
			if !strings.Contains(value, "\x00") {
				id = value
			}
		}
	}
	// The unterminated rest is read too, and can pass the limit before the stream ends.
	return out, size+len(in) > limit
}

// chunkReader cuts its input at pseudo-random points.
type chunkReader struct {
	b   []byte
	rng *rand.Rand
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	n := 1 + c.rng.IntN(min(len(c.b), 17))
	n = copy(p, c.b[:n])
	c.b = c.b[n:]
	return n, nil
}

// FuzzReader: whatever the bytes and wherever the reads cut them, the Reader yields exactly
// the events of the reference parser.
func FuzzReader(f *testing.F) {
	for _, s := range []string{
		"data: a\n\n", "data: a\r\n\r\n", "data: a\r\r", "\xEF\xBB\xBFdata: x\n\n",
		"event: e\nid: 1\ndata: a\ndata: b\n\n: c\n\ndata:no-space\r\n\r\n",
		"data: a\r", "id: \x00\ndata\n\n", "data: 你好\n\n",
	} {
		f.Add([]byte(s), uint64(1), uint16(0))
		f.Add([]byte(s), uint64(2), uint16(4))
	}
	f.Fuzz(func(t *testing.T, in []byte, seed uint64, limit uint16) {
		max := int(limit)
		if max == 0 {
			max = DefaultMaxEvent
		}
		want, over := referenceParse(string(in), max)
		readers := map[string]io.Reader{
			"whole":    bytes.NewReader(in),
			"one byte": iotest.OneByteReader(bytes.NewReader(in)),
			"random":   &chunkReader{b: in, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b9))},
		}
		for name, rd := range readers {
			got, err := readAll(NewReaderLimit(rd, int(limit)))
			if over != errors.Is(err, ErrEventTooLarge) || (!over && err != nil) {
				t.Fatalf("%s: error %v, reference over the limit %d: %v, for %q", name, err, max, over, in)
			}
			if !sameEvents(got, want) {
				t.Fatalf("%s: events %q, reference %q for %q", name, got, want, in)
			}
		}
	})
}

// FuzzWriterRoundTrip: what the Writer writes, the Reader reads back (line breaks in data
// normalised to LF, as SSE defines).
func FuzzWriterRoundTrip(f *testing.F) {
	f.Add("message", []byte("a\nb"))
	f.Add("", []byte("x\r\ny\rz\n"))
	f.Add("e", []byte(""))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		var buf bytes.Buffer
		w := NewWriter(&buf)
		if err := w.Comment("ping\nevent: injected"); err != nil {
			t.Fatal(err)
		}
		if err := w.Event(name, data); err != nil {
			t.Fatal(err)
		}
		got, err := readAll(NewReader(&buf))
		if err != nil {
			t.Fatal(err)
		}
		norm := strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(string(data))
		wantName := strings.NewReplacer("\r\n", " ", "\r", " ", "\n", " ").Replace(name)
		if len(got) != 1 || string(got[0].Data) != norm || got[0].Type != wantName {
			t.Fatalf("wrote %q %q, read %q", name, data, got)
		}
	})
}

// FuzzLineEnd: lineEnd is bytes.IndexAny(b, "\r\n").
func FuzzLineEnd(f *testing.F) {
	for _, s := range []string{"", "a", "a\nb", "a\r\nb", "\r", "ab\n\rc", "abc\rd\ne"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := lineEnd(b), bytes.IndexAny(b, "\r\n"); got != want {
			t.Fatalf("lineEnd(%q) = %d, want %d", b, got, want)
		}
	})
}
