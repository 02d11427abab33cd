package httpapi

import (
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/tollgate/tollgate/providers/llm"
)

// The relay engine: how every ingress format's answer to a call that started is written,
// streamed or whole. The rules live here once — the SSE headers and when events are flushed,
// the time to first byte and the usage the log line and the ledger read, a failure before
// the first byte (the format's error answer) and after it (the format's error event, then
// the end), a client that hangs up (a 499, never the backend's fault), a backend's own
// answer in the client's format relayed as it came — and each format brings only its wire
// (answerFormat): chat (chat_answer.go), Responses, Messages, embeddings; a batch's members
// are chat answers written into their batch's (batch.go).

// answerFormat is one wire format's answer to a call.
type answerFormat interface {
	// whole is the answer as one body.
	whole() wholeSink
}

// streamedFormat is a format whose answer can also be streamed.
type streamedFormat interface {
	answerFormat
	// stream is the answer as SSE events, written to out. It is asked for once the
	// answer's headers are out.
	stream(out *eventOut) streamSink
}

// streamSink is a format's streamed answer as the engine drives it. Its methods write
// through the eventOut it was made with; an error is a failed write (eventOut.gone), or a
// chunk the format cannot take: an *llm.Error says what failed, any other error is an
// undecodable chunk.
type streamSink interface {
	start() error            // the events before the first chunk
	add(ch *llm.Chunk) error // the events of one chunk
	end() error              // the events after the last chunk
	fail(a apiError) error   // the format's in-stream error event, ending the stream
}

// wholeSink is a format's whole answer as the engine reads it: every chunk, then the body.
// An error is the backend's failure, as for streamSink.
type wholeSink interface {
	add(ch *llm.Chunk) error
	build() (any, error)
}

// nativeFollower is a sink that keeps track of a native stream's events, so that an error
// event it writes after them continues the stream (Responses' sequence numbers and response).
type nativeFollower interface {
	follow(event string, raw []byte)
}

// The formats: a format missing stream would be answered whole.
var (
	_ streamedFormat = (*chatAnswer)(nil)
	_ streamedFormat = (*responsesAnswer)(nil)
	_ streamedFormat = (*messagesAnswer)(nil)
	_ answerFormat   = embeddingsAnswer{}
	_ nativeFollower = (*responsesAnswer)(nil)
)

// buffered is the optional capability of a stream that can tell whether its next chunk has
// already arrived (the OpenAI-compatible adapter can; translating adapters cannot).
type buffered interface{ Buffered() bool }

// relay writes the answer of a call that started, in format in, streamed or whole as the
// request asks (a format that cannot be streamed has no request that asks it).
func (s *Server) relay(w http.ResponseWriter, r *http.Request, in *ingress, st llm.Stream, p *parsed, rec *record) {
	f := in.answer(s, p, rec)
	if sf, ok := f.(streamedFormat); ok && p.req.Stream {
		s.relayStream(w, r, in, st, sf, rec)
		return
	}
	s.relayWhole(w, r, in, st, f, rec)
}

// relayStream writes a streamed answer. Chunks in the client's own format (a backend that
// speaks it, relaying the client's body) are written as they came; the others go through
// the format's sink. Once the first byte is out a failure can only end the stream: with the
// format's error event, never a half event.
//
// An event is flushed as soon as its chunk is written unless the stream says its next chunk
// is already here: chunks that arrived together then share one write, as
// httputil.ReverseProxy sends whatever one read returned, and no event ever waits unflushed
// for the backend. Flushing each of them separately costs a syscall and a client wake-up
// per chunk, which a bare proxy does not pay (docs/benchmarks.md).
func (s *Server) relayStream(w http.ResponseWriter, r *http.Request, in *ingress, st llm.Stream, f streamedFormat, rec *record) {
	if !openSSE(w, st, rec) {
		return
	}
	sr := &streamRelay{rec: rec, in: in}
	sr.out.init(w)
	sr.sink = f.stream(&sr.out)
	s.relayEvents(r, st, sr)
}

// relayEvents writes a stream's chunks through sr until the stream ends, fails or its
// client is gone: a call's own answer (relayStream) or a batch member's part of its batch's
// (batch.go).
func (s *Server) relayEvents(r *http.Request, st llm.Stream, sr *streamRelay) {
	rec := sr.rec
	hint, _ := st.(buffered)
	for first := true; ; first = false {
		var err error
		if sr.ch, err = st.Next(); err == io.EOF {
			break
		}
		if err == nil {
			s.took(&sr.ch, rec, first)
			var over bool
			if over, err = sr.add(&sr.ch); over {
				return
			}
		}
		if err != nil {
			if a, ok := s.answerError(r, err, rec); ok {
				sr.fail(a)
			}
			return
		}
		if hint == nil || !hint.Buffered() {
			if sr.out.flush() != nil {
				rec.clientGone = true
				return
			}
		}
	}
	s.closeStream(st, rec) // the backend is done: its lanes go back before the last event
	sr.end()
}

// took notes what a chunk of the answer tells the log line: the time to the first, and the
// usage so far.
func (s *Server) took(ch *llm.Chunk, rec *record, first bool) {
	if first {
		rec.ttfb = s.opts.Now().Sub(rec.start)
	}
	if ch.Usage != nil {
		rec.usage = *ch.Usage
	}
}

// streamRelay is a streamed answer as relayStream writes it.
type streamRelay struct {
	out     eventOut
	ch      llm.Chunk // the chunk being written: here, as the sinks take its address
	sink    streamSink
	rec     *record
	in      *ingress
	native  bool // the backend's own events are being relayed
	started bool // the sink's opening events are out
}

// add writes one chunk. It reports the stream over when the client is gone or a native
// stream's terminal event is out, and returns the failure of a chunk the sink could not
// take, which the stream is to end with.
//
// A native stream is over once its terminal event is out: what follows is only the end of
// the backend's body, and a client that hangs up as soon as it has the terminal event, as
// Codex does, has its whole answer.
func (sr *streamRelay) add(ch *llm.Chunk) (over bool, err error) {
	if ch.Format == sr.in.native && sr.in.native != llm.FormatChat {
		sr.native = true
		if f, ok := sr.sink.(nativeFollower); ok {
			f.follow(ch.Event, ch.Raw)
		}
		if sr.out.event(ch.Event, ch.Raw) != nil || sr.in.terminal[ch.Event] && sr.out.flush() != nil {
			sr.rec.clientGone = true
			return true, nil
		}
		return sr.in.terminal[ch.Event], nil
	}
	if !sr.started {
		sr.started = true
		if sr.sink.start() != nil {
			sr.rec.clientGone = true
			return true, nil
		}
	}
	if err := sr.sink.add(ch); err != nil {
		if sr.out.gone {
			sr.rec.clientGone = true
			return true, nil
		}
		return false, chunkFailure(err, "")
	}
	return false, nil
}

// fail ends the stream with the format's error event for a, opening the answer first if
// nothing was written yet.
func (sr *streamRelay) fail(a apiError) {
	if !sr.native && !sr.started {
		_ = sr.sink.start()
	}
	a.retryAfter = 0 // too late for the client to act on a wait: the stream just ends
	_ = sr.sink.fail(a)
	_ = sr.out.flush()
}

// end closes an answer written from chat chunks after the last; a relayed native stream
// ended with the backend's own events.
func (sr *streamRelay) end() {
	if !sr.native && (!sr.started && sr.sink.start() != nil || sr.sink.end() != nil) || sr.out.flush() != nil {
		sr.rec.clientGone = true
	}
}

// relayWhole writes a whole answer: a backend's own body in the client's format as it came,
// or the format's body made from every chunk once they are all in.
func (s *Server) relayWhole(w http.ResponseWriter, r *http.Request, in *ingress, st llm.Stream, f answerFormat, rec *record) {
	a, err := s.collect(st, in.native, f.whole(), rec, "")
	switch {
	case err != nil:
		s.fail(w, r, in, err, rec)
	case a.native:
		s.writeWhole(w, a.raw, rec)
	default:
		rec.ttfb = s.opts.Now().Sub(rec.start)
		writeJSON(w, http.StatusOK, a.body)
	}
}

// wholeAnswer is a whole answer as collect read it: the backend's own body in the client's
// format (native), or the body the format's sink built from every chunk.
type wholeAnswer struct {
	native bool
	raw    []byte
	body   any
}

// collect reads a stream to its end for a whole answer in native's format, through sink. The
// stream is closed as soon as the backend has said all, so its lanes go back before the
// answer is written. A chunk the sink cannot take fails the answer (chunkFailure), naming
// provider when one is given: a batch's members span providers.
func (s *Server) collect(st llm.Stream, native llm.Format, sink wholeSink, rec *record, provider string) (wholeAnswer, error) {
	var ch llm.Chunk // one for the whole answer, as the sink takes its address
	for {
		var err error
		if ch, err = st.Next(); err == io.EOF {
			break
		}
		if err != nil {
			return wholeAnswer{}, err
		}
		s.took(&ch, rec, false)
		if ch.Complete && ch.Format == native {
			s.closeStream(st, rec)
			return wholeAnswer{native: true, raw: ch.Raw}, nil
		}
		if err := sink.add(&ch); err != nil {
			return wholeAnswer{}, chunkFailure(err, provider)
		}
	}
	s.closeStream(st, rec)
	body, err := sink.build()
	return wholeAnswer{body: body}, err
}

// writeWhole writes a backend's whole answer as it came.
func (s *Server) writeWhole(w http.ResponseWriter, raw []byte, rec *record) {
	rec.ttfb = s.opts.Now().Sub(rec.start)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(raw); err != nil {
		rec.clientGone = true
	}
}

// answerError maps a failure to the client's answer and records it, unless the call ended
// because the client left: then nothing is written (a 499 in the log, and never the
// backend's fault).
func (s *Server) answerError(r *http.Request, err error, rec *record) (apiError, bool) {
	if r.Context().Err() != nil || errors.Is(err, context.Canceled) {
		rec.clientGone = true
		return apiError{}, false
	}
	a := toAPIError(err, s.opts.Gateway.RetryAfter())
	rec.fail(a)
	return a, true
}

// chunkFailure is the failure a format's error on a chunk stands for: the *llm.Error it
// is, or the backend's undecodable chunk (of provider, when given).
func chunkFailure(err error, provider string) error {
	if e := (*llm.Error)(nil); errors.As(err, &e) {
		return err
	}
	return &llm.Error{Kind: llm.KindUpstream, Provider: provider, Message: "backend sent an undecodable chunk: " + err.Error()}
}
