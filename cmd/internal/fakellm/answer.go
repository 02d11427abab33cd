package fakellm

import (
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/providers/sse"
)

// midstreamAfter is how many content chunks go out before error-midstream or drop strikes.
const midstreamAfter = 3

// streamer writes one API's streaming events; the driver (Server.stream) decides what comes
// when. Each method writes whole events through the emitter and returns its error.
type streamer interface {
	start(e *emitter) error                  // events before the first chunk
	reasoning(e *emitter, text string) error // one reasoning chunk
	content(e *emitter, text string) error   // one content chunk
	fail(e *emitter) error                   // the endpoint's mid-stream error, ending the stream
	finish(e *emitter) error                 // finish reason, usage and end-of-stream events
}

func newStreamer(c *call) streamer {
	if c.completion != nil {
		return completionStream{c}
	}
	switch c.api {
	case apiResponses:
		return newResponsesStream(c)
	case apiAnthropic:
		return newAnthropicStream(c)
	case apiGemini:
		return newGeminiStream(c)
	}
	return newChatStream(c)
}

// stream answers c as a stream: the start events, the reasoning and content chunks with the
// chunk interval between them, then the end, unless a mode breaks the stream on the way.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, c *call) error {
	if c.api == apiGemini && !c.geminiSSE {
		w.Header().Set("Content-Type", "application/json") // a JSON array, streamed
	} else {
		sse.SetHeaders(w.Header())
	}
	w.WriteHeader(http.StatusOK)
	interval, lead := s.interval, time.Duration(0)
	if s.opts.Hold > 0 {
		interval = s.opts.Hold / time.Duration(max(1, len(c.reasoning)+len(c.pieces)))
		lead = interval
	}
	e := newEmitter(w, r, c.modes, interval)
	defer e.stop()
	st := newStreamer(c)
	if err := st.start(e); err != nil {
		return err
	}
	if lead > 0 && e.wait(lead) != nil {
		return e.err
	}
	if c.tool != nil {
		return st.(toolStreamer).toolCall(e, c.tool) // planTool plans calls only for streamers that have it
	}
	cut := -1
	if c.modes&(ModeDrop|ModeErrorMidstream) != 0 {
		cut = min(midstreamAfter, len(c.pieces))
	}
	n := 0
	for _, p := range c.reasoning {
		if n > 0 && e.gap() != nil {
			return e.err
		}
		n++
		if err := st.reasoning(e, p); err != nil {
			return err
		}
	}
	for i, p := range c.pieces {
		if i == cut {
			break
		}
		if n > 0 && e.gap() != nil {
			return e.err
		}
		n++
		if err := st.content(e, p); err != nil {
			return err
		}
	}
	switch {
	case cut < 0:
		return st.finish(e)
	case c.modes.Has(ModeDrop):
		return e.drop()
	}
	return st.fail(e)
}

// whole answers c in one JSON body, written as the modes ask: after blank lines (keepalive,
// as DeepSeek does while a request is queued), split or dripped, or cut off (drop).
func (s *Server) whole(w http.ResponseWriter, r *http.Request, c *call) error {
	var body []byte
	switch {
	case c.embed != nil:
		body = embedWhole(c)
	case c.completion != nil:
		body = completionWhole(c)
	case c.tool != nil:
		body = toolWhole(c)
	case c.api == apiResponses:
		body = responsesWhole(c)
	case c.api == apiAnthropic:
		body = anthropicWhole(c)
	case c.api == apiGemini:
		body = geminiWhole(c)
	default:
		body = chatWhole(c)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	e := newEmitter(w, r, c.modes, s.interval)
	defer e.stop()
	if c.modes.Has(ModeDrop) {
		h.Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		if e.send(body[:len(body)/2]) != nil {
			return e.err
		}
		return e.drop()
	}
	w.WriteHeader(http.StatusOK)
	if c.modes.Has(ModeKeepalive) {
		for range 3 {
			if e.interval > 0 && e.wait(e.interval) != nil {
				return e.err
			}
			if e.send([]byte("\n")) != nil {
				return e.err
			}
		}
	}
	return e.send(body)
}

// appendChatUsage appends an OpenAI usage object.
func appendChatUsage(b []byte, c *call) []byte {
	out := c.completionTokens()
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(c.prompt), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(out), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(c.prompt+out), 10)
	if len(c.reasoning) > 0 {
		b = append(b, `,"completion_tokens_details":{"reasoning_tokens":`...)
		b = strconv.AppendInt(b, int64(len(c.reasoning)), 10)
		b = append(b, '}')
	}
	return append(b, '}')
}
