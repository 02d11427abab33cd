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

// relayStream writes the backend's chunks as OpenAI SSE. Once the first byte is out a failure
// can only end the stream: with one error event, never a half event.
//
// No event is ever held back while the relay waits for the backend: it flushes whenever the
// next chunk is not already there. Chunks that arrived together (a backend burst, or a
// client slower than its backend) go out in one write, as httputil.ReverseProxy sends
// whatever one read returned; flushing each event separately cost a syscall and a client
// wake-up per chunk and made streams ~1.5× dearer than the bare proxy (docs/benchmarks.md).
func (s *Server) relayStream(w http.ResponseWriter, r *http.Request, st llm.Stream, req *llm.Request, rec *record) {
	sse.SetHeaders(w.Header())
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	out := sse.NewWriter(struct{ io.Writer }{w}) // hides the Flusher: flushing is ours
	enc := newChunkEncoder(rec.id, req.Model, s.opts.Now())
	// Until the first event is out the relay reads the stream itself, so the first event is
	// flushed without a hand-off between goroutines (~13 µs at concurrency 1); then the pump
	// takes over reading.
	var p *pump
	defer func() {
		if p != nil {
			p.stop()
		}
	}()
	next, ready := st.Next, func() bool { return false }
	var usage *llm.Usage // a structured stream's usage, sent last when the client asked for it
	first, unflushed := true, false
	for {
		if unflushed && !ready() {
			if err := rc.Flush(); err != nil {
				rec.clientGone = true
				return
			}
			unflushed = false
			if p == nil {
				p = startPump(st)
				next, ready = p.next, p.ready
			}
		}
		ch, err := next()
		if err == io.EOF {
			break
		}
		if err != nil {
			s.endStream(r.Context(), out, err, rec)
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
		var data []byte
		switch {
		case ch.Raw != nil:
			if ch.UsageOnly && !req.WantsUsage() {
				continue
			}
			data = ch.Raw
		default:
			if ch.Usage != nil {
				usage = ch.Usage
			}
			if ch.Role == "" && ch.Content == "" && ch.ReasoningContent == "" && ch.ToolCalls == nil && ch.FinishReason == "" {
				continue // a usage-only structured chunk
			}
			data = enc.chunk(&ch)
		}
		if err := out.Data(data); err != nil {
			rec.clientGone = true
			return
		}
		unflushed = true
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

// pump reads a stream ahead on its own goroutine, so that the relay can tell "the next chunk
// is already here" from "the next chunk must be waited for".
type pump struct {
	ch   chan pumped
	quit chan struct{}
	done chan struct{}
}

type pumped struct {
	chunk llm.Chunk
	err   error
}

// pumpDepth bounds how far the pump reads ahead of a slow client.
const pumpDepth = 8

func startPump(st llm.Stream) *pump {
	p := &pump{ch: make(chan pumped, pumpDepth), quit: make(chan struct{}), done: make(chan struct{})}
	// The goroutine exits after passing on the stream's end (io.EOF or an error), or at stop.
	go p.run(st)
	return p
}

func (p *pump) run(st llm.Stream) {
	defer close(p.done)
	for {
		ch, err := st.Next()
		select {
		case p.ch <- pumped{chunk: ch, err: err}:
		case <-p.quit:
			return
		}
		if err != nil {
			return
		}
	}
}

// next returns the stream's next chunk or its end; call it no more after an error.
func (p *pump) next() (llm.Chunk, error) {
	v := <-p.ch
	return v.chunk, v.err
}

// ready reports whether next will return without waiting.
func (p *pump) ready() bool { return len(p.ch) > 0 }

// stop ends the pump and waits until it no longer calls the stream, so that the stream can
// be closed. A pump blocked in Next is freed by the end of the call: the gateway cancels the
// backend call when the client goes away, the only reason the relay stops early.
func (p *pump) stop() {
	close(p.quit)
	<-p.done
}

// endStream reports a failure after the headers went out, unless the client is gone.
func (s *Server) endStream(ctx context.Context, out *sse.Writer, err error, rec *record) {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		rec.clientGone = true
		return
	}
	a := toAPIError(err, s.opts.Gateway.RetryAfter())
	a.retryAfter = 0 // too late for the client to act on a wait: the stream just ends
	rec.fail(a)
	_ = out.Data(a.event())
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
			if r.Context().Err() != nil || errors.Is(err, context.Canceled) {
				rec.clientGone = true
				return
			}
			a := toAPIError(err, s.opts.Gateway.RetryAfter())
			rec.fail(a)
			a.write(w)
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
