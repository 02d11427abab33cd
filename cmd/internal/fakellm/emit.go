package fakellm

import (
	"context"
	"errors"
	"net/http"
	"time"
	"unicode/utf8"
)

// errDropped ends a stream that the drop mode cut on purpose.
var errDropped = errors.New("fakellm: connection dropped on purpose")

// emitter writes a streamed answer event by event, flushing each, in the way the request's
// modes ask: paced, with keep-alive comments between chunks, split inside UTF-8 characters,
// or one byte per flush. It remembers a failed write so the caller can stop early.
type emitter struct {
	w        http.ResponseWriter
	rc       *http.ResponseController
	ctx      context.Context
	modes    Modes
	interval time.Duration
	timer    *time.Timer // reused between chunks; nil until the first pause
	err      error       // the first write or context error; every later call returns it
}

func newEmitter(w http.ResponseWriter, r *http.Request, modes Modes, interval time.Duration) *emitter {
	return &emitter{w: w, rc: http.NewResponseController(w), ctx: r.Context(), modes: modes, interval: interval}
}

// send writes one event (or one JSON element) and flushes it.
func (e *emitter) send(b []byte) error {
	if e.err != nil {
		return e.err
	}
	switch {
	case e.modes.Has(ModeSlowDrip):
		for i := range b {
			if e.write(b[i:i+1]) != nil {
				break
			}
		}
	case e.modes.Has(ModeSplitUTF8):
		cut := splitPoint(b)
		if e.write(b[:cut]) == nil && cut < len(b) {
			e.write(b[cut:])
		}
	default:
		e.write(b)
	}
	return e.err
}

// splitPoint returns an index inside the first multi-byte UTF-8 character of b (just after its
// lead byte), or len(b) when b has none.
func splitPoint(b []byte) int {
	for i, c := range b {
		if c >= 0xC0 {
			return i + 1
		}
	}
	return len(b)
}

func (e *emitter) write(b []byte) error {
	if _, err := e.w.Write(b); err != nil {
		e.err = err
		return err
	}
	if err := e.rc.Flush(); err != nil {
		e.err = err
	}
	return e.err
}

// gap runs between two chunks: it waits the chunk interval unless the client goes away, then
// writes a keep-alive comment when that mode is on.
func (e *emitter) gap() error {
	if e.err != nil {
		return e.err
	}
	if e.interval > 0 {
		if err := e.wait(e.interval); err != nil {
			return err
		}
	}
	if e.modes.Has(ModeKeepalive) {
		return e.send(keepAlive)
	}
	return nil
}

var keepAlive = []byte(": keep-alive\n\n")

// wait pauses d or until the client goes away (then it records and returns ctx.Err()).
func (e *emitter) wait(d time.Duration) error {
	if e.timer == nil {
		e.timer = time.NewTimer(d)
	} else {
		e.timer.Reset(d) // Go ≥ 1.23: no drain needed
	}
	select {
	case <-e.ctx.Done():
		e.timer.Stop()
		e.err = e.ctx.Err()
	case <-e.timer.C:
	}
	return e.err
}

// stop releases the timer; called once the answer is over.
func (e *emitter) stop() {
	if e.timer != nil {
		e.timer.Stop()
	}
}

// drop cuts the connection without ending the response properly: the client sees a body
// that stops short (an unterminated chunked body).
func (e *emitter) drop() error {
	if e.err != nil {
		return e.err
	}
	conn, _, err := e.rc.Hijack()
	if err != nil {
		e.err = err
		return err
	}
	conn.Close()
	e.err = errDropped
	return e.err
}

// waitCtx pauses d before the answer starts; it returns ctx.Err() if the client goes first.
func waitCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. It escapes what JSON requires plus U+2028/U+2029,
// replaces invalid UTF-8 with U+FFFD, and leaves other characters as they are, so CJK and
// emoji stay multi-byte on the wire.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			switch r {
			case utf8.RuneError:
				b = append(b, `\ufffd`...)
			case '\u2028':
				b = append(b, `\u2028`...)
			default:
				b = append(b, `\u2029`...)
			}
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
