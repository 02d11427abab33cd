package fakellm

import (
	"strconv"
	"strings"
)

// responsesStream writes OpenAI Responses events the way Codex reads them: response.created,
// an optional reasoning item (summary deltas), the message item (output_text deltas), each
// closed by response.output_item.done with the whole item, then response.completed (or
// response.incomplete when max_output_tokens cut the answer) carrying the usage.
type responsesStream struct {
	c         *call
	buf       []byte
	seq       int
	respID    string
	rsID      string // the reasoning item
	msgID     string // the message item
	inReason  bool   // the reasoning item is open
	inMessage bool   // the message item is open
	thought   []byte // reasoning text so far
	text      []byte // output text so far
}

func newResponsesStream(c *call) *responsesStream {
	return &responsesStream{c: c, respID: "resp_fakellm_" + c.id, rsID: "rs_fakellm_" + c.id,
		msgID: "msg_fakellm_" + c.id, buf: make([]byte, 0, 512), thought: []byte{}, text: []byte{}}
}

// begin starts an event: its SSE name and the data object's type and sequence number. The
// caller appends the other fields and calls end.
func (s *responsesStream) begin(name string) []byte {
	b := append(s.buf[:0], "event: "...)
	b = append(b, name...)
	b = append(b, "\ndata: {\"type\":\""...)
	b = append(b, name...)
	b = append(b, `","sequence_number":`...)
	b = strconv.AppendInt(b, int64(s.seq), 10)
	s.seq++
	return b
}

func (s *responsesStream) end(e *emitter, b []byte) error {
	b = append(b, "}\n\n"...)
	s.buf = b
	return e.send(b)
}

// appendItemRef appends the fields that point at an item's part.
func appendItemRef(b []byte, id string, outIndex int, indexKey string) []byte {
	b = append(b, `,"item_id":"`...)
	b = append(b, id...)
	b = append(b, `","output_index":`...)
	b = strconv.AppendInt(b, int64(outIndex), 10)
	b = append(b, `,"`...)
	b = append(b, indexKey...)
	return append(b, `":0`...)
}

func (s *responsesStream) msgIndex() int {
	if len(s.c.reasoning) > 0 {
		return 1
	}
	return 0
}

func (s *responsesStream) start(e *emitter) error {
	b := s.begin("response.created")
	b = append(b, `,"response":`...)
	b = appendResponse(b, s.c, "in_progress", nil, nil)
	return s.end(e, b)
}

func (s *responsesStream) reasoning(e *emitter, text string) error {
	if !s.inReason {
		s.inReason = true
		b := s.begin("response.output_item.added")
		b = append(b, `,"output_index":0,"item":`...)
		b = appendReasoningItem(b, s.rsID, nil, false)
		if err := s.end(e, b); err != nil {
			return err
		}
		b = s.begin("response.reasoning_summary_part.added")
		b = appendItemRef(b, s.rsID, 0, "summary_index")
		b = append(b, `,"part":{"type":"summary_text","text":""}`...)
		if err := s.end(e, b); err != nil {
			return err
		}
	}
	s.thought = append(s.thought, text...)
	b := s.begin("response.reasoning_summary_text.delta")
	b = appendItemRef(b, s.rsID, 0, "summary_index")
	b = append(b, `,"delta":`...)
	b = appendString(b, text)
	return s.end(e, b)
}

// closeReasoning ends the reasoning item before the message starts.
func (s *responsesStream) closeReasoning(e *emitter) error {
	s.inReason = false
	b := s.begin("response.reasoning_summary_text.done")
	b = appendItemRef(b, s.rsID, 0, "summary_index")
	b = append(b, `,"text":`...)
	b = appendString(b, string(s.thought))
	if err := s.end(e, b); err != nil {
		return err
	}
	b = s.begin("response.reasoning_summary_part.done")
	b = appendItemRef(b, s.rsID, 0, "summary_index")
	b = append(b, `,"part":{"type":"summary_text","text":`...)
	b = appendString(b, string(s.thought))
	b = append(b, '}')
	if err := s.end(e, b); err != nil {
		return err
	}
	b = s.begin("response.output_item.done")
	b = append(b, `,"output_index":0,"item":`...)
	b = appendReasoningItem(b, s.rsID, s.thought, true)
	return s.end(e, b)
}

func (s *responsesStream) openMessage(e *emitter) error {
	if s.inReason {
		if err := s.closeReasoning(e); err != nil {
			return err
		}
	}
	s.inMessage = true
	b := s.begin("response.output_item.added")
	b = append(b, `,"output_index":`...)
	b = strconv.AppendInt(b, int64(s.msgIndex()), 10)
	b = append(b, `,"item":`...)
	b = appendMessageItem(b, s.msgID, "in_progress", nil)
	if err := s.end(e, b); err != nil {
		return err
	}
	b = s.begin("response.content_part.added")
	b = appendItemRef(b, s.msgID, s.msgIndex(), "content_index")
	b = append(b, `,"part":{"type":"output_text","annotations":[],"text":""}`...)
	return s.end(e, b)
}

func (s *responsesStream) content(e *emitter, text string) error {
	if !s.inMessage {
		if err := s.openMessage(e); err != nil {
			return err
		}
	}
	s.text = append(s.text, text...)
	b := s.begin("response.output_text.delta")
	b = appendItemRef(b, s.msgID, s.msgIndex(), "content_index")
	b = append(b, `,"delta":`...)
	b = appendString(b, text)
	return s.end(e, b)
}

func (s *responsesStream) finish(e *emitter) error {
	if !s.inMessage {
		if err := s.openMessage(e); err != nil {
			return err
		}
	}
	b := s.begin("response.output_text.done")
	b = appendItemRef(b, s.msgID, s.msgIndex(), "content_index")
	b = append(b, `,"text":`...)
	b = appendString(b, string(s.text))
	if err := s.end(e, b); err != nil {
		return err
	}
	b = s.begin("response.content_part.done")
	b = appendItemRef(b, s.msgID, s.msgIndex(), "content_index")
	b = append(b, `,"part":{"type":"output_text","annotations":[],"text":`...)
	b = appendString(b, string(s.text))
	b = append(b, '}')
	if err := s.end(e, b); err != nil {
		return err
	}
	b = s.begin("response.output_item.done")
	b = append(b, `,"output_index":`...)
	b = strconv.AppendInt(b, int64(s.msgIndex()), 10)
	b = append(b, `,"item":`...)
	b = appendMessageItem(b, s.msgID, "completed", s.text)
	if err := s.end(e, b); err != nil {
		return err
	}
	status, name := "completed", "response.completed"
	if s.c.truncated {
		status, name = "incomplete", "response.incomplete"
	}
	b = s.begin(name)
	b = append(b, `,"response":`...)
	b = appendResponse(b, s.c, status, s.thought, s.text)
	return s.end(e, b)
}

// fail ends the stream with response.failed, which Codex reads (response.error.code/message).
func (s *responsesStream) fail(e *emitter) error {
	b := s.begin("response.failed")
	b = append(b, `,"response":`...)
	b = appendResponse(b, s.c, "failed", nil, nil)
	return s.end(e, b)
}

// appendResponse appends a response object. Output items are included when text is non-nil;
// usage when the response is over.
func appendResponse(b []byte, c *call, status string, thought, text []byte) []byte {
	b = append(b, `{"id":"resp_fakellm_`...)
	b = append(b, c.id...)
	b = append(b, `","object":"response","created_at":`...)
	b = strconv.AppendInt(b, c.created, 10)
	b = append(b, `,"status":"`...)
	b = append(b, status...)
	b = append(b, `","model":`...)
	b = appendString(b, c.model)
	b = append(b, `,"output":[`...)
	if c.tool != nil && text != nil {
		b = appendFunctionCallItem(b, c, "completed", c.tool.args)
	} else if text != nil {
		if len(c.reasoning) > 0 {
			b = appendReasoningItem(b, "rs_fakellm_"+c.id, thought, true)
			b = append(b, ',')
		}
		b = appendMessageItem(b, "msg_fakellm_"+c.id, "completed", text)
	}
	b = append(b, ']')
	switch status {
	case "failed":
		b = append(b, `,"error":{"code":"server_error","message":"The server had an error while processing your request."}`...)
	case "incomplete":
		b = append(b, `,"incomplete_details":{"reason":"max_output_tokens"}`...)
	}
	if status == "completed" || status == "incomplete" {
		out := c.completionTokens()
		b = append(b, `,"usage":{"input_tokens":`...)
		b = strconv.AppendInt(b, int64(c.prompt), 10)
		b = append(b, `,"input_tokens_details":{"cached_tokens":0},"output_tokens":`...)
		b = strconv.AppendInt(b, int64(out), 10)
		b = append(b, `,"output_tokens_details":{"reasoning_tokens":`...)
		b = strconv.AppendInt(b, int64(len(c.reasoning)), 10)
		b = append(b, `},"total_tokens":`...)
		b = strconv.AppendInt(b, int64(c.prompt+out), 10)
		b = append(b, '}')
	}
	return append(b, '}')
}

func appendMessageItem(b []byte, id, status string, text []byte) []byte {
	b = append(b, `{"id":"`...)
	b = append(b, id...)
	b = append(b, `","type":"message","status":"`...)
	b = append(b, status...)
	b = append(b, `","role":"assistant","content":[`...)
	if text != nil {
		b = append(b, `{"type":"output_text","annotations":[],"text":`...)
		b = appendString(b, string(text))
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

func appendReasoningItem(b []byte, id string, thought []byte, done bool) []byte {
	b = append(b, `{"id":"`...)
	b = append(b, id...)
	b = append(b, `","type":"reasoning","summary":[`...)
	if done {
		b = append(b, `{"type":"summary_text","text":`...)
		b = appendString(b, string(thought))
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// responsesWhole is a non-streaming response object.
func responsesWhole(c *call) []byte {
	status := "completed"
	if c.truncated {
		status = "incomplete"
	}
	return appendResponse(nil, c, status, []byte(strings.Join(c.reasoning, "")), []byte(strings.Join(c.pieces, "")))
}
