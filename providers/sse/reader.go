// Package sse reads and writes Server-Sent Events as the WHATWG HTML standard defines them.
//
// The Reader accepts LF, CRLF and lone-CR line ends (also when a CRLF is split across reads),
// joins multi-line data, skips comments and drops a last event that the stream did not
// terminate with a blank line. It works on bytes and hands out whole events only, so a
// multi-byte character split across network reads is never seen half.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// Event is one dispatched event.
type Event struct {
	Type string // the "event" field; "" when absent (the standard's "message")
	Data []byte // the data lines joined by LF; valid until the next call to Next
	ID   string // the last event ID seen so far on the stream
}

// DefaultMaxEvent is the event size limit of a Reader made by NewReader. Tool-call chunks can
// be large, so it is far above bufio.Scanner's 64 KiB default; it only stops a backend that
// never ends an event from making the Reader buffer without end.
const DefaultMaxEvent = 8 << 20

// ErrEventTooLarge is returned (wrapped, with the limit) when an event grows past the
// Reader's limit before the blank line that ends it.
var ErrEventTooLarge = errors.New("sse: event too large")

// Reader reads events from a stream.
type Reader struct {
	r       *bufio.Reader
	data    []byte // the pending event's data buffer
	evType  string
	lastID  string
	line    []byte // the current line, reused
	skipLF  bool   // the previous line ended in CR: a leading LF belongs to it
	started bool   // a leading BOM has been looked for
	max     int    // the event size limit
	size    int    // bytes in the current event's lines so far
	// Comments counts comment lines seen; a relay uses it as proof of liveness.
	Comments int
}

// BufferSize is the Reader's read buffer. Lines longer than it are assembled across reads, so
// it bounds nothing but memory: a relay holds one per open stream, and a 32 KiB buffer was 61%
// of the gateway's allocated bytes in the relay benchmark (docs/benchmarks.md), for chunks
// that are typically a few hundred bytes.
const BufferSize = 4 << 10

// NewReader returns a Reader on r with the DefaultMaxEvent limit. An r that is already a
// *bufio.Reader of at least BufferSize is used as it is.
func NewReader(r io.Reader) *Reader { return NewReaderLimit(r, DefaultMaxEvent) }

// NewReaderLimit returns a Reader on r that refuses events larger than maxEvent bytes;
// maxEvent <= 0 means DefaultMaxEvent. An event's size is the sum of its lines' lengths,
// line ends excepted, from the line after the previous blank line to the blank line that ends
// it (comments and event or id lines count too): that is what the Reader holds while it
// waits for the blank line, so it never holds more than about twice maxEvent.
func NewReaderLimit(r io.Reader, maxEvent int) *Reader {
	if maxEvent <= 0 {
		maxEvent = DefaultMaxEvent
	}
	return &Reader{r: bufio.NewReaderSize(r, BufferSize), max: maxEvent}
}

// Next returns the next event. At the end of the stream it returns io.EOF; an event that was
// not terminated by a blank line is discarded, as the standard requires. An event over the
// limit ends the stream with an error wrapping ErrEventTooLarge; other errors come from the
// underlying reader.
func (r *Reader) Next() (Event, error) {
	r.data = r.data[:0]
	r.evType = ""
	r.size = 0
	hasData := false
	for {
		line, err := r.readLine(r.max - r.size)
		if err != nil {
			return Event{}, err
		}
		if len(line) == 0 { // blank line: dispatch
			r.size = 0
			if !hasData {
				r.evType = ""
				continue
			}
			data := r.data
			if n := len(data); n > 0 && data[n-1] == '\n' {
				data = data[:n-1]
			}
			return Event{Type: r.evType, Data: data, ID: r.lastID}, nil
		}
		r.size += len(line)
		if line[0] == ':' {
			r.Comments++
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "data":
			r.data = append(r.data, value...)
			r.data = append(r.data, '\n')
			hasData = true
		case "event":
			r.evType = string(value)
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				r.lastID = string(value)
			}
		}
		// "retry" and unknown fields are ignored: a relay does not reconnect.
	}
}

// readLine returns the next line without its terminator, refusing one longer than limit. A
// line cut short by the end of the stream is not a line: io.EOF is returned instead, which
// discards any pending event.
func (r *Reader) readLine(limit int) ([]byte, error) {
	r.line = r.line[:0]
	for {
		b, err := r.r.ReadByte()
		if err != nil {
			if err == io.EOF {
				return nil, io.EOF
			}
			return nil, err
		}
		if !r.started {
			r.started = true
			if b == 0xEF { // a UTF-8 BOM is EF BB BF; strip one at the very start
				if p, _ := r.r.Peek(2); len(p) == 2 && p[0] == 0xBB && p[1] == 0xBF {
					_, _ = r.r.Discard(2)
					continue
				}
			}
		}
		if r.skipLF {
			r.skipLF = false
			if b == '\n' {
				continue
			}
		}
		switch b {
		case '\n':
			return r.line, nil
		case '\r':
			r.skipLF = true
			return r.line, nil
		}
		if len(r.line) >= limit {
			return nil, r.tooLarge()
		}
		r.line = append(r.line, b)
		// Fast path: take the rest of the line from the buffer in one go.
		if buf, _ := r.r.Peek(r.r.Buffered()); len(buf) > 0 {
			n := lineEnd(buf)
			if n < 0 {
				n = len(buf)
			}
			if len(r.line)+n > limit {
				return nil, r.tooLarge()
			}
			r.line = append(r.line, buf[:n]...)
			_, _ = r.r.Discard(n)
		}
	}
}

func (r *Reader) tooLarge() error {
	return fmt.Errorf("%w: an event passed %d bytes without ending", ErrEventTooLarge, r.max)
}

// Ready reports whether a data event is already buffered in full, so the next call to Next
// will return it without waiting for the network. A relay uses it to decide whether to flush
// now or to let the next event share the write. It looks only at buffered bytes and never
// reads; blocks without data (comments, keep-alives) are skipped as Next skips them.
func (r *Reader) Ready() bool {
	buf, _ := r.r.Peek(r.r.Buffered())
	if r.skipLF && len(buf) > 0 && buf[0] == '\n' {
		buf = buf[1:]
	}
	hasData := false // Next consumes whole events, so the buffer starts at an event's start
	for len(buf) > 0 {
		i := lineEnd(buf)
		if i < 0 {
			return false // the rest is a line still arriving
		}
		line := buf[:i]
		next := buf[i+1:]
		if buf[i] == '\r' && len(next) > 0 && next[0] == '\n' {
			next = next[1:]
		}
		switch {
		case len(line) == 0:
			if hasData {
				return true
			}
		case bytes.HasPrefix(line, []byte("data")) && (len(line) == 4 || line[4] == ':'):
			hasData = true
		}
		buf = next
	}
	return false
}

// lineEnd is the index of b's first '\r' or '\n', or -1: bytes.IndexAny(b, "\r\n"), in two
// vectorised byte searches rather than a lookup per byte (it runs on every line relayed).
func lineEnd(b []byte) int {
	n := bytes.IndexByte(b, '\n')
	if n >= 0 {
		b = b[:n]
	}
	if r := bytes.IndexByte(b, '\r'); r >= 0 {
		return r
	}
	return n
}
