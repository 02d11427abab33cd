package cli

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// maxLineBytes bounds one JSON event line. CLIs put whole messages (and Claude its init
// record listing every tool) on one line, far beyond bufio.Scanner's 64 KiB default.
const maxLineBytes = 16 << 20

// errLineTooLong reports a line over maxLineBytes; the stream cannot be trusted past it.
var errLineTooLong = errors.New("event line too long")

// lineReader splits a child's stdout into complete lines. Reads may end anywhere, even inside
// a multi-byte character; a line is only handed out once its newline (or EOF) has arrived,
// so decoding never sees half a character.
type lineReader struct {
	r   *bufio.Reader
	max int
	buf []byte
}

func newLineReader(r io.Reader, max int) *lineReader {
	if max <= 0 {
		max = maxLineBytes
	}
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// next returns the next non-blank line without its line ending (LF or CRLF). The slice is
// valid until the following call. At the end it returns io.EOF; a final line without a
// newline is still returned first.
func (l *lineReader) next() ([]byte, error) {
	for {
		line, err := l.readLine()
		if len(bytes.TrimSpace(line)) > 0 {
			return line, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func (l *lineReader) readLine() ([]byte, error) {
	l.buf = l.buf[:0]
	for {
		frag, err := l.r.ReadSlice('\n')
		if len(l.buf)+len(frag) > l.max {
			return nil, fmt.Errorf("%w (over %d bytes)", errLineTooLong, l.max)
		}
		l.buf = append(l.buf, frag...)
		switch {
		case err == nil:
			return trimEOL(l.buf), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if len(l.buf) > 0 {
				return trimEOL(l.buf), nil // the next call reports EOF
			}
			return nil, io.EOF
		default:
			return nil, err // a cut-off line is worthless; the read error says why
		}
	}
}

func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r"))
}
