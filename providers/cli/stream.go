package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/upstream"
)

// decoder turns one CLI's stdout event lines into chunks. One decoder serves one run.
type decoder interface {
	// line decodes one non-blank stdout line. It returns the chunks the line yields
	// (structured, Raw nil) and a non-nil failure when the line ends the run as failed.
	line(b []byte) ([]llm.Chunk, *failure)
	// finished reports whether the CLI's final success event has been decoded.
	finished() bool
	// hint is the last error the CLI reported without ending the run (retry notices,
	// warnings), used to explain a run that ends badly without a final event.
	hint() *failure
	// finalEvent names the event a complete run ends with, for error messages.
	finalEvent() string
}

// stream is a running CLI answer: an llm.Stream over the child's stdout.
type stream struct {
	ctx      context.Context
	provider string
	command  string // for messages: the CLI's name
	proc     *process
	lines    *lineReader
	dec      decoder
	red      redactor
	onStderr func(string)
	cleanup  func() // removes the per-request working directory; may be nil

	pending  []llm.Chunk
	err      error // terminal: io.EOF or why the stream ended; returned after pending drains
	sentRole bool

	closeOnce sync.Once
}

var _ llm.Stream = (*stream)(nil)

// Next returns the next chunk, io.EOF after the CLI's final event, or the error that ended
// the run: an *llm.Error for CLI failures, ctx.Err() when the context ended it.
func (s *stream) Next() (llm.Chunk, error) {
	for len(s.pending) == 0 && s.err == nil {
		s.advance()
	}
	if len(s.pending) > 0 {
		c := s.pending[0]
		s.pending = s.pending[1:]
		return c, nil
	}
	return llm.Chunk{}, s.err
}

// prime reads until the first chunk is pending or the run has ended, so that Open can
// return failures that happen before any output as errors of its own.
func (s *stream) prime() error {
	for len(s.pending) == 0 && s.err == nil {
		s.advance()
	}
	if len(s.pending) == 0 && s.err != io.EOF {
		return s.err
	}
	return nil
}

// advance decodes one more stdout line, or ends the stream.
func (s *stream) advance() {
	if s.dec.finished() {
		s.err = io.EOF // what follows the final event (if anything) is not part of the answer
		return
	}
	line, err := s.lines.next()
	if err != nil {
		s.err = s.endError(err)
		return
	}
	chunks, f := s.dec.line(line)
	for _, c := range chunks {
		if !s.sentRole && !c.UsageOnly {
			c.Role = "assistant"
			s.sentRole = true
		}
		s.pending = append(s.pending, c)
	}
	if f != nil {
		s.err = f.toError(s.provider, s.red)
	}
}

// endError explains why stdout ended before the final event. At EOF it waits for the child
// to be reaped (stdout closing means it is exiting) to know its exit status; after a read
// error the child is stopped, since the rest of its output cannot be trusted.
func (s *stream) endError(readErr error) error {
	if !errors.Is(readErr, io.EOF) {
		s.proc.terminate()
	}
	select {
	case <-s.proc.exited:
	case <-s.ctx.Done():
		s.proc.terminate()
	}
	if err := s.ctx.Err(); err != nil {
		return err
	}
	if errors.Is(readErr, errLineTooLong) {
		return &llm.Error{Kind: llm.KindUpstream, Provider: s.provider,
			Message: fmt.Sprintf("%s printed an event line too long to decode", s.command), Err: readErr}
	}
	f := failure{}
	if h := s.dec.hint(); h != nil {
		f = *h
	}
	how := s.proc.exitDescription()
	if !errors.Is(readErr, io.EOF) {
		how = "reading its output: " + readErr.Error()
	}
	detail := f.message
	if detail == "" {
		detail = stderrDetail(s.stderrTail(), 3, 600)
	}
	if s.proc.exitCode() == 0 && errors.Is(readErr, io.EOF) {
		how = "exited without " + s.dec.finalEvent()
		if !f.known { // nothing the CLI reported explains it better: the answer was cut off
			f.kind, f.known = llm.KindUpstreamTruncated, true
		}
	}
	f.message = strings.TrimSpace(fmt.Sprintf("%s %s: %s", s.command, how, detail))
	f.message = strings.TrimSuffix(f.message, ":")
	return f.toError(s.provider, s.red)
}

// Close stops the CLI if it is still running (SIGTERM to its process group, SIGKILL after
// the grace period) and returns once it has been reaped and its working directory removed.
// After a complete answer the CLI first gets the grace period to exit on its own.
func (s *stream) Close() error {
	s.closeOnce.Do(func() {
		s.proc.release(s.dec.finished())
		if s.onStderr != nil {
			if tail := strings.TrimSpace(s.stderrTail()); tail != "" {
				s.onStderr(tail)
			}
		}
		if s.cleanup != nil {
			s.cleanup()
		}
		s.pending = nil
		if s.err == nil {
			s.err = errClosed
		}
	})
	return nil
}

var errClosed = errors.New("cli: stream closed")

// stderrTail is the child's stderr as far as it was kept, redacted: what messages and logs
// may show of it, and what they cut (redacted first, so a key cut in half cannot escape
// redaction by no longer matching).
func (s *stream) stderrTail() string { return s.red.redact(s.proc.stderr.String()) }

// stderrDetail is what a failed run's stderr says, for its error message: its last n
// non-blank lines, at most limit bytes. s must already be redacted (stderrTail): a key the
// cut went through would no longer match its value. When the last line that reports an error comes before
// them, it leads instead of the first of them: a CLI refusing its arguments prints the error
// and then its usage ("error: the argument '--x' cannot be used multiple times", "Usage:
// codex exec [OPTIONS] <COMMAND> [ARGS]", "For more information, try '--help'."), and the
// usage alone says nothing.
func stderrDetail(s string, n, limit int) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	errAt := -1
	for i := len(lines) - 1; i >= 0 && errAt < 0; i-- {
		if reportsError(lines[i]) {
			errAt = i
		}
	}
	if errAt < 0 || errAt >= len(lines)-n {
		return keepTail(strings.Join(lines[max(0, len(lines)-n):], " | "), limit)
	}
	return upstream.Cut(strings.Join(append([]string{lines[errAt]}, lines[len(lines)-n+1:]...), " | "), limit)
}

// reportsError reports whether a stderr line states an error ("error: ...", "Error: ...",
// "fatal: ...") rather than usage or progress.
func reportsError(line string) bool {
	l := strings.ToLower(line)
	return strings.HasPrefix(l, "error") || strings.HasPrefix(l, "fatal") || strings.Contains(l, "error:")
}

// keepTail cuts s to its last max bytes, at a character boundary, marking the cut.
func keepTail(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := len(s) - max
	for cut < len(s) && !utf8.RuneStart(s[cut]) {
		cut++
	}
	return "…" + s[cut:]
}
