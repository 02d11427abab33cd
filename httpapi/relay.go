package httpapi

import (
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/sse"
)

var doneData = []byte("[DONE]")

// buffered is the optional capability of a stream that can tell whether its next chunk has
// already arrived (the OpenAI-compatible adapter can; translating adapters cannot).
type buffered interface{ Buffered() bool }

// relayStream writes the backend's chunks as OpenAI SSE. Once the first byte is out a failure
// can only end the stream: with one error event, never a half event.
//
// An event is flushed as soon as it is written unless the stream says its next chunk is
// already here: chunks that arrived together then share one write, as httputil.ReverseProxy
// sends whatever one read returned, and no event ever waits unflushed for the backend.
// Flushing each of them separately costs a syscall and a client wake-up per chunk, which a
// bare proxy does not pay (docs/benchmarks.md).
func (s *Server) relayStream(w http.ResponseWriter, r *http.Request, st llm.Stream, req *llm.Request, rec *record) {
	if !openSSE(w, st, rec) {
		return
	}
	rc := http.NewResponseController(w)
	out := sse.NewWriter(struct{ io.Writer }{w}) // hides the Flusher: flushing is ours
	enc := newChunkEncoder(rec.id, req.Model, s.opts.Now())
	hint, _ := st.(buffered)
	var usage *llm.Usage // a structured stream's usage, sent last when the client asked for it
	first := true
	for {
		ch, err := st.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			s.endStream(r, out, err, rec)
			_ = rc.Flush()
			return
		}
		if first {
			rec.ttfb = s.opts.Now().Sub(rec.start)
			first = false
		}
		if ch.Usage != nil {
			rec.usage = *ch.Usage
		}
		data := enc.wire(&ch, req, &usage)
		if data == nil {
			continue
		}
		if err := out.Data(data); err != nil {
			rec.clientGone = true
			return
		}
		if hint == nil || !hint.Buffered() {
			if err := rc.Flush(); err != nil {
				rec.clientGone = true
				return
			}
		}
	}
	if usage != nil && req.WantsUsage() {
		if err := out.Data(enc.usage(usage)); err != nil {
			rec.clientGone = true
			return
		}
	}
	if err := out.Data(doneData); err != nil || rc.Flush() != nil {
		rec.clientGone = true
	}
}

// openSSE starts a streamed answer: the status and the SSE headers. The call has left the
// queue: the headers (X-Gateway-Queue-Ms among them) go out now, unless the first chunk is
// already here to carry them, so a client can tell a call still queued from one whose backend
// is slow to its first token (the console's "queued in the gateway" and "generating"). It
// reports false, noting it, when the client is gone.
func openSSE(w http.ResponseWriter, st llm.Stream, rec *record) bool {
	sse.SetHeaders(w.Header())
	w.WriteHeader(http.StatusOK)
	if hint, _ := st.(buffered); hint == nil || !hint.Buffered() {
		if http.NewResponseController(w).Flush() != nil {
			rec.clientGone = true
			return false
		}
	}
	return true
}

// answerError maps a failure before the headers went out to the client's answer and records
// it, unless the call ended because the client left: then nothing is written (a 499 in the
// log, and never the backend's fault).
func (s *Server) answerError(r *http.Request, err error, rec *record) (apiError, bool) {
	if r.Context().Err() != nil || errors.Is(err, context.Canceled) {
		rec.clientGone = true
		return apiError{}, false
	}
	a := toAPIError(err, s.opts.Gateway.RetryAfter())
	rec.fail(a)
	return a, true
}

// endStream reports a failure after the headers went out: one error event, then the end.
func (s *Server) endStream(r *http.Request, out *sse.Writer, err error, rec *record) {
	if a, ok := s.answerError(r, err, rec); ok {
		a.retryAfter = 0 // too late for the client to act on a wait: the stream just ends
		_ = out.Data(a.event())
	}
}

// relayWhole answers a non-streaming request with one chat.completion.
func (s *Server) relayWhole(w http.ResponseWriter, r *http.Request, st llm.Stream, req *llm.Request, rec *record) {
	var acc completion
	for {
		ch, err := st.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			if a, ok := s.answerError(r, err, rec); ok {
				a.write(w)
			}
			return
		}
		if ch.Usage != nil {
			rec.usage = *ch.Usage
		}
		if ch.Complete {
			rec.ttfb = s.opts.Now().Sub(rec.start)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(ch.Raw)
			return
		}
		if err := acc.add(&ch); err != nil {
			a := toAPIError(&llm.Error{Kind: llm.KindUpstream, Message: "backend sent an undecodable chunk: " + err.Error()}, 0)
			rec.fail(a)
			a.write(w)
			return
		}
	}
	rec.ttfb = s.opts.Now().Sub(rec.start)
	writeJSON(w, http.StatusOK, acc.build(rec.id, req.Model, s.opts.Now()))
}
