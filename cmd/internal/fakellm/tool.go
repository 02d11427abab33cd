package fakellm

import (
	"encoding/json"
	"strconv"
	"strings"
)

// The tool-call mode plays a coding agent's backend for one task that needs one tool call:
// while the conversation holds no tool result, the answer is a call of the agent's shell
// tool running ToolCommand (harmless and read-only); once a result is there, the answer is
// text saying whether the command's output (ToolMarker) came back. An agent behind a relay
// that translates tools both ways therefore finishes with ToolDoneReply.

const (
	// ToolMarker is what ToolCommand prints.
	ToolMarker = "tollgate-tool-ok"
	// ToolCommand is the command the fake asks the agent to run.
	ToolCommand = "echo " + ToolMarker
	// ToolDoneReply is the answer once a tool result holding ToolMarker came back.
	ToolDoneReply = "The command printed " + ToolMarker + "."
	// ToolLostReply is the answer when a tool result came back without ToolMarker.
	ToolLostReply = "The tool result did not hold the command's output."
)

// toolPlan is the call an answer makes.
type toolPlan struct {
	id, name, args string
}

// shellTools are the shell tools of the agents the fake knows, with the arguments that run
// ToolCommand: Codex's exec_command (and its older shell), Claude Code's Bash.
var shellTools = []struct {
	name string
	args any
}{
	{"exec_command", map[string]any{"cmd": ToolCommand}},
	{"shell", map[string]any{"command": []string{"bash", "-lc", ToolCommand}}},
	{"Bash", map[string]any{"command": ToolCommand, "description": "Print a marker"}},
}

// planTool decides c's answer in tool-call mode: a tool call when the conversation has no
// tool result yet and offers a shell tool the fake knows, else the reply about the result.
// A conversation without a known tool is answered as usual.
func (s *Server) planTool(c *call) {
	if c.sawResult {
		reply := ToolLostReply
		if strings.Contains(c.toolResult, ToolMarker) {
			reply = ToolDoneReply
		}
		c.pieces = group(tokenize(reply), s.opts.Chunks)
		return
	}
	for _, t := range shellTools {
		for _, name := range c.tools {
			if name == t.name {
				args, _ := json.Marshal(t.args)
				c.tool = &toolPlan{id: "call_fakellm_" + c.id, name: name, args: string(args)}
				c.pieces, c.reasoning = nil, nil
				return
			}
		}
	}
}

// toolStreamer is a streamer that can answer with a tool call: toolCall writes the call and
// every event after it, ending the stream.
type toolStreamer interface {
	toolCall(e *emitter, t *toolPlan) error
}

// outputText reads a tool result's content: a string, or parts whose text (or nested
// content) holds it.
func outputText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text    string          `json:"text"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
		b.WriteString(outputText(p.Content))
	}
	return b.String()
}

// toolCall writes a chat tool call: the call's id and name, its arguments, the
// tool_calls finish, the usage when asked for, [DONE].
func (s *chatStream) toolCall(e *emitter, t *toolPlan) error {
	b := append(s.buf[:0], s.prefix...)
	b = append(b, `{"index":0,"delta":{"tool_calls":[{"index":0,"id":`...)
	b = appendString(b, t.id)
	b = append(b, `,"type":"function","function":{"name":`...)
	b = appendString(b, t.name)
	b = append(b, `,"arguments":""}}]},"finish_reason":null}]`...)
	b = append(b, s.suffix...)
	s.buf = b
	if err := e.send(b); err != nil {
		return err
	}
	b = append(s.buf[:0], s.prefix...)
	b = append(b, `{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":`...)
	b = appendString(b, t.args)
	b = append(b, `}}]},"finish_reason":null}]`...)
	b = append(b, s.suffix...)
	s.buf = b
	if err := e.send(b); err != nil {
		return err
	}
	return s.finish(e) // chatFinish says tool_calls
}

// toolCall writes a Responses function_call item: added, its arguments, done, then
// response.completed with the item as the whole output.
func (s *responsesStream) toolCall(e *emitter, t *toolPlan) error {
	b := s.begin("response.output_item.added")
	b = append(b, `,"output_index":0,"item":`...)
	b = appendFunctionCallItem(b, s.c, "in_progress", "")
	if err := s.end(e, b); err != nil {
		return err
	}
	b = s.begin("response.function_call_arguments.delta")
	b = append(b, `,"item_id":"fc_fakellm_`...)
	b = append(b, s.c.id...)
	b = append(b, `","output_index":0,"delta":`...)
	b = appendString(b, t.args)
	if err := s.end(e, b); err != nil {
		return err
	}
	b = s.begin("response.function_call_arguments.done")
	b = append(b, `,"item_id":"fc_fakellm_`...)
	b = append(b, s.c.id...)
	b = append(b, `","output_index":0,"arguments":`...)
	b = appendString(b, t.args)
	if err := s.end(e, b); err != nil {
		return err
	}
	b = s.begin("response.output_item.done")
	b = append(b, `,"output_index":0,"item":`...)
	b = appendFunctionCallItem(b, s.c, "completed", t.args)
	if err := s.end(e, b); err != nil {
		return err
	}
	b = s.begin("response.completed")
	b = append(b, `,"response":`...)
	b = appendResponse(b, s.c, "completed", nil, []byte{})
	return s.end(e, b)
}

func appendFunctionCallItem(b []byte, c *call, status, args string) []byte {
	b = append(b, `{"id":"fc_fakellm_`...)
	b = append(b, c.id...)
	b = append(b, `","type":"function_call","status":"`...)
	b = append(b, status...)
	b = append(b, `","call_id":`...)
	b = appendString(b, c.tool.id)
	b = append(b, `,"name":`...)
	b = appendString(b, c.tool.name)
	b = append(b, `,"arguments":`...)
	b = appendString(b, args)
	return append(b, '}')
}

// toolCall writes an Anthropic tool_use block with its input, then the tool_use stop.
func (s *anthropicStream) toolCall(e *emitter, t *toolPlan) error {
	err := s.openBlock(e, `,"content_block":{"type":"tool_use","id":`+string(appendString(nil, t.id))+
		`,"name":`+string(appendString(nil, t.name))+`,"input":{}}`)
	if err != nil {
		return err
	}
	err = s.event(e, "content_block_delta", func(b []byte) []byte {
		b = s.index(b)
		b = append(b, `,"delta":{"type":"input_json_delta","partial_json":`...)
		b = appendString(b, t.args)
		return append(b, '}')
	})
	if err != nil {
		return err
	}
	if err := s.stopBlock(e); err != nil {
		return err
	}
	err = s.event(e, "message_delta", func(b []byte) []byte {
		b = append(b, `,"delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":`...)
		b = strconv.AppendInt(b, int64(s.c.completionTokens()), 10)
		return append(b, '}')
	})
	if err != nil {
		return err
	}
	return s.event(e, "message_stop", func(b []byte) []byte { return b })
}

// toolWhole is a non-streaming answer that is a tool call, in c's API.
func toolWhole(c *call) []byte {
	t := c.tool
	switch c.api {
	case apiResponses:
		return appendResponse(nil, c, "completed", nil, []byte{})
	case apiAnthropic:
		b := append([]byte(nil), `{"id":"msg_fakellm_`...)
		b = append(b, c.id...)
		b = append(b, `","type":"message","role":"assistant","model":`...)
		b = appendString(b, c.model)
		b = append(b, `,"content":[{"type":"tool_use","id":`...)
		b = appendString(b, t.id)
		b = append(b, `,"name":`...)
		b = appendString(b, t.name)
		b = append(b, `,"input":`...)
		b = append(b, t.args...)
		b = append(b, `}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":`...)
		b = strconv.AppendInt(b, int64(c.prompt), 10)
		b = append(b, `,"output_tokens":`...)
		b = strconv.AppendInt(b, int64(c.completionTokens()), 10)
		return append(b, "}}"...)
	}
	b := append([]byte(nil), `{"id":"chatcmpl-fakellm-`...)
	b = append(b, c.id...)
	b = append(b, `","object":"chat.completion","created":`...)
	b = strconv.AppendInt(b, c.created, 10)
	b = append(b, `,"model":`...)
	b = appendString(b, c.model)
	b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":`...)
	b = appendString(b, t.id)
	b = append(b, `,"type":"function","function":{"name":`...)
	b = appendString(b, t.name)
	b = append(b, `,"arguments":`...)
	b = appendString(b, t.args)
	b = append(b, `}}]},"finish_reason":"tool_calls","logprobs":null}],"usage":`...)
	b = appendChatUsage(b, c)
	return append(b, '}')
}
