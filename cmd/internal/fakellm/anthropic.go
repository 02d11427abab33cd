package fakellm

import (
	"net/http"
	"strconv"
	"strings"
)

// fakeSignature is the signature of every thinking block; clients pass it back opaquely.
const fakeSignature = "ZmFrZWxsbS1zaWduYXR1cmU="

// anthropicStream writes Anthropic Messages events: message_start, ping, a thinking block when the
// answer has reasoning, the text block, message_delta with the stop reason and usage,
// message_stop.
type anthropicStream struct {
	c       *call
	buf     []byte
	block   int  // index of the open content block
	inThink bool // the thinking block is open
	inText  bool // the text block is open
}

func newAnthropicStream(c *call) *anthropicStream {
	return &anthropicStream{c: c, buf: make([]byte, 0, 512)}
}

// event writes one event; data is built by fill after the type field.
func (s *anthropicStream) event(e *emitter, name string, fill func([]byte) []byte) error {
	b := append(s.buf[:0], "event: "...)
	b = append(b, name...)
	b = append(b, "\ndata: {\"type\":\""...)
	b = append(b, name...)
	b = append(b, '"')
	b = fill(b)
	b = append(b, "}\n\n"...)
	s.buf = b
	return e.send(b)
}

func (s *anthropicStream) index(b []byte) []byte {
	b = append(b, `,"index":`...)
	return strconv.AppendInt(b, int64(s.block), 10)
}

func (s *anthropicStream) start(e *emitter) error {
	err := s.event(e, "message_start", func(b []byte) []byte {
		b = append(b, `,"message":{"id":"msg_fakellm_`...)
		b = append(b, s.c.id...)
		b = append(b, `","type":"message","role":"assistant","model":`...)
		b = appendString(b, s.c.model)
		b = append(b, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":`...)
		b = strconv.AppendInt(b, int64(s.c.prompt), 10)
		return append(b, `,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}`...)
	})
	if err != nil {
		return err
	}
	// Anthropic sends a ping early in every stream; relays must skip it.
	return s.event(e, "ping", func(b []byte) []byte { return b })
}

func (s *anthropicStream) openBlock(e *emitter, block string) error {
	return s.event(e, "content_block_start", func(b []byte) []byte {
		b = s.index(b)
		return append(b, block...)
	})
}

func (s *anthropicStream) stopBlock(e *emitter) error {
	err := s.event(e, "content_block_stop", s.index)
	s.block++
	return err
}

func (s *anthropicStream) delta(e *emitter, kind, key, text string) error {
	return s.event(e, "content_block_delta", func(b []byte) []byte {
		b = s.index(b)
		b = append(b, `,"delta":{"type":"`...)
		b = append(b, kind...)
		b = append(b, `","`...)
		b = append(b, key...)
		b = append(b, `":`...)
		b = appendString(b, text)
		return append(b, '}')
	})
}

func (s *anthropicStream) reasoning(e *emitter, text string) error {
	if !s.inThink {
		s.inThink = true
		if err := s.openBlock(e, `,"content_block":{"type":"thinking","thinking":"","signature":""}`); err != nil {
			return err
		}
	}
	return s.delta(e, "thinking_delta", "thinking", text)
}

// openText closes the thinking block, if any, and opens the text block.
func (s *anthropicStream) openText(e *emitter) error {
	if s.inThink {
		s.inThink = false
		if err := s.delta(e, "signature_delta", "signature", fakeSignature); err != nil {
			return err
		}
		if err := s.stopBlock(e); err != nil {
			return err
		}
	}
	s.inText = true
	return s.openBlock(e, `,"content_block":{"type":"text","text":""}`)
}

func (s *anthropicStream) content(e *emitter, text string) error {
	if !s.inText {
		if err := s.openText(e); err != nil {
			return err
		}
	}
	return s.delta(e, "text_delta", "text", text)
}

func (s *anthropicStream) finish(e *emitter) error {
	if !s.inText {
		if err := s.openText(e); err != nil {
			return err
		}
	}
	if err := s.stopBlock(e); err != nil {
		return err
	}
	err := s.event(e, "message_delta", func(b []byte) []byte {
		b = append(b, `,"delta":{"stop_reason":"`...)
		b = append(b, anthropicStop(s.c)...)
		b = append(b, `","stop_sequence":null},"usage":{"output_tokens":`...)
		b = strconv.AppendInt(b, int64(s.c.completionTokens()), 10)
		return append(b, '}')
	})
	if err != nil {
		return err
	}
	return s.event(e, "message_stop", func(b []byte) []byte { return b })
}

// fail sends the error event Anthropic sends after a 200 when it runs out of capacity.
func (s *anthropicStream) fail(e *emitter) error {
	return s.event(e, "error", func(b []byte) []byte {
		return append(b, `,"error":{"type":"overloaded_error","message":"Overloaded"}`...)
	})
}

func anthropicStop(c *call) string {
	if c.truncated {
		return "max_tokens"
	}
	return "end_turn"
}

// anthropicWhole is a non-streaming message.
func anthropicWhole(c *call) []byte {
	b := append([]byte(nil), `{"id":"msg_fakellm_`...)
	b = append(b, c.id...)
	b = append(b, `","type":"message","role":"assistant","model":`...)
	b = appendString(b, c.model)
	b = append(b, `,"content":[`...)
	if len(c.reasoning) > 0 {
		b = append(b, `{"type":"thinking","thinking":`...)
		b = appendString(b, strings.Join(c.reasoning, ""))
		b = append(b, `,"signature":"`+fakeSignature+`"},`...)
	}
	b = append(b, `{"type":"text","text":`...)
	b = appendString(b, strings.Join(c.pieces, ""))
	b = append(b, `}],"stop_reason":"`...)
	b = append(b, anthropicStop(c)...)
	b = append(b, `","stop_sequence":null,"usage":{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(c.prompt), 10)
	b = append(b, `,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":`...)
	b = strconv.AppendInt(b, int64(c.completionTokens()), 10)
	return append(b, "}}"...)
}

// countTokens answers POST /v1/messages/count_tokens, which Claude Code may call.
func (s *Server) countTokens(w http.ResponseWriter, r *http.Request) {
	var c call
	if err := parseAnthropic(w, r, &c); err != nil {
		writeError(w, apiAnthropic, invalidRequest(apiAnthropic, err.Error()))
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"input_tokens": c.prompt})
}
