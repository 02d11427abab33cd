package httpapi

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/providers/llm"
)

// messagesAnswer turns a chat answer into a Messages answer: message_start and a ping, then a
// content block per piece — thinking, text, tool_use with input_json_delta — then
// message_delta with the stop reason and usage, and message_stop. With emit nil it only
// assembles the blocks, for a non-streaming answer.
//
// A thinking or text block ends when another block begins. tool_use blocks stay open until
// the answer ends: a chat backend may interleave the fragments of parallel calls, and every
// delta names its block's index.
type messagesAnswer struct {
	emit  emitFunc // nil: no stream
	id    string
	model string

	blocks []*msgBlock
	open   *msgBlock         // the thinking or text block being written, if any
	calls  map[int]*msgBlock // tool_use blocks by chat tool call index
	usage  *llm.Usage
	finish llm.FinishReason
}

type msgBlock struct {
	typ   string // thinking, text, tool_use
	index int
	text  strings.Builder // thinking, text, or the tool input's JSON
	id    string
	name  string
	done  bool
}

func newMessagesAnswer(requestID, model string) *messagesAnswer {
	return &messagesAnswer{id: "msg_" + requestID, model: model, calls: map[int]*msgBlock{}}
}

func (a *messagesAnswer) event(name string, ev msgEvent) error {
	if a.emit == nil {
		return nil
	}
	ev.Type = name
	return a.emit(name, &ev)
}

func (a *messagesAnswer) start() error {
	m := a.message(false)
	if err := a.event("message_start", msgEvent{Message: m}); err != nil {
		return err
	}
	return a.event("ping", msgEvent{})
}

func (a *messagesAnswer) add(ch *llm.Chunk) error {
	if ch.Raw != nil {
		return structured(ch, a.add) // an OpenAI-compatible backend's chunk
	}
	if ch.Usage != nil {
		a.usage = ch.Usage
	}
	if ch.FinishReason != "" {
		a.finish = ch.FinishReason
	}
	if ch.Index != 0 {
		return nil // a message has one answer: choices beyond the first are dropped
	}
	if ch.ReasoningContent != "" {
		if err := a.text("thinking", ch.ReasoningContent); err != nil {
			return err
		}
	}
	if ch.Content != "" {
		if err := a.text("text", ch.Content); err != nil {
			return err
		}
	}
	for _, t := range ch.ToolCalls {
		if err := a.toolCall(t); err != nil {
			return err
		}
	}
	return nil
}

func (a *messagesAnswer) newBlock(typ string) *msgBlock {
	b := &msgBlock{typ: typ, index: len(a.blocks)}
	a.blocks = append(a.blocks, b)
	return b
}

// text writes thinking or text, opening a block of that type when another is open.
func (a *messagesAnswer) text(typ, text string) error {
	if a.open == nil || a.open.typ != typ {
		if err := a.closeOpen(); err != nil {
			return err
		}
		b := a.newBlock(typ)
		a.open = b
		if err := a.event("content_block_start", msgEvent{Index: &b.index, ContentBlock: b.json(false)}); err != nil {
			return err
		}
	}
	b := a.open
	b.text.WriteString(text)
	d := &msgDelta{Type: "text_delta", Text: &text}
	if typ == "thinking" {
		d = &msgDelta{Type: "thinking_delta", Thinking: &text}
	}
	return a.event("content_block_delta", msgEvent{Index: &b.index, Delta: d})
}

func (a *messagesAnswer) toolCall(t llm.ToolCallDelta) error {
	b, ok := a.calls[t.Index]
	if !ok {
		if err := a.closeOpen(); err != nil {
			return err
		}
		b = a.newBlock("tool_use")
		b.id, b.name = t.ID, t.Name
		if b.id == "" {
			b.id = "toolu_" + a.id[len("msg_"):] + "_" + strconv.Itoa(b.index)
		}
		a.calls[t.Index] = b
		if err := a.event("content_block_start", msgEvent{Index: &b.index, ContentBlock: b.json(false)}); err != nil {
			return err
		}
	}
	if t.Arguments == "" {
		return nil
	}
	b.text.WriteString(t.Arguments)
	return a.event("content_block_delta", msgEvent{Index: &b.index,
		Delta: &msgDelta{Type: "input_json_delta", PartialJSON: &t.Arguments}})
}

func (a *messagesAnswer) closeOpen() error {
	b := a.open
	if b == nil {
		return nil
	}
	a.open = nil
	return a.stop(b)
}

func (a *messagesAnswer) stop(b *msgBlock) error {
	b.done = true
	return a.event("content_block_stop", msgEvent{Index: &b.index})
}

func (a *messagesAnswer) end() error {
	if err := a.closeOpen(); err != nil {
		return err
	}
	for _, b := range a.blocks {
		if !b.done {
			if err := a.stop(b); err != nil {
				return err
			}
		}
	}
	stop := a.stopReason()
	if err := a.event("message_delta", msgEvent{Delta: &msgDelta{StopReason: &stop, StopSequence: new(json.RawMessage("null"))},
		Usage: messagesUsage(a.usage)}); err != nil {
		return err
	}
	return a.event("message_stop", msgEvent{})
}

// fail sends the error event Anthropic sends after a 200, in its shape with Tollgate's code.
func (a *messagesAnswer) fail(e apiError) error {
	if a.emit == nil {
		return nil
	}
	return a.emit("error", messagesError(e))
}

// stopReason maps the chat finish reason onto Anthropic's.
func (a *messagesAnswer) stopReason() string {
	switch a.finish {
	case llm.FinishLength:
		return "max_tokens"
	case llm.FinishToolCalls:
		return "tool_use"
	case llm.FinishContentFilter:
		return "refusal"
	}
	for _, b := range a.blocks {
		if b.typ == "tool_use" {
			return "tool_use" // a backend that called tools but said "stop"
		}
	}
	return "end_turn"
}

// message is the message object: empty for message_start, whole once the answer is in.
func (a *messagesAnswer) message(whole bool) *msgObject {
	m := &msgObject{ID: a.id, Type: "message", Role: "assistant", Model: a.model, Content: []*msgBlockJSON{},
		StopSequence: json.RawMessage("null"), StopReason: json.RawMessage("null")}
	if !whole {
		m.Usage = &msgUsage{}
		return m
	}
	for _, b := range a.blocks {
		m.Content = append(m.Content, b.json(true))
	}
	stop, _ := json.Marshal(a.stopReason())
	m.StopReason = stop
	m.Usage = messagesUsage(a.usage)
	return m
}

func (b *msgBlock) json(whole bool) *msgBlockJSON {
	j := &msgBlockJSON{Type: b.typ}
	text := ""
	if whole {
		text = b.text.String()
	}
	switch b.typ {
	case "text":
		j.Text, j.Citations = &text, new([]struct{}(nil))
	case "thinking":
		j.Thinking, j.Signature = &text, new("")
	case "tool_use":
		j.ID, j.Name, j.Input, j.Caller = b.id, b.name, json.RawMessage("{}"), &msgCaller{Type: "direct"}
		if whole {
			j.Input = json.RawMessage(compactJSON(json.RawMessage(text)))
		}
	}
	return j
}

// messagesUsage is Anthropic's usage: input_tokens excludes cached prompt tokens, which are
// counted apart (OpenAI's prompt_tokens includes them).
func messagesUsage(u *llm.Usage) *msgUsage {
	if u == nil {
		return &msgUsage{}
	}
	return &msgUsage{InputTokens: u.PromptTokens - u.CachedTokens, OutputTokens: u.CompletionTokens,
		CacheReadInputTokens: u.CachedTokens}
}

// The Messages wire shapes the gateway writes.

type msgEvent struct {
	Type         string        `json:"type"`
	Message      *msgObject    `json:"message,omitempty"`
	Index        *int          `json:"index,omitempty"`
	ContentBlock *msgBlockJSON `json:"content_block,omitempty"`
	Delta        *msgDelta     `json:"delta,omitempty"`
	Usage        *msgUsage     `json:"usage,omitempty"`
}

type msgObject struct {
	ID           string          `json:"id"`
	Type         string          `json:"type"`
	Role         string          `json:"role"`
	Model        string          `json:"model"`
	Content      []*msgBlockJSON `json:"content"`
	StopReason   json.RawMessage `json:"stop_reason"`
	StopSequence json.RawMessage `json:"stop_sequence"`
	Usage        *msgUsage       `json:"usage"`
	// What a chat backend's answer has nothing to say about, null as Anthropic's own
	// messages say it (the SDKs' types have each): no container tool ran, no refusal or
	// diagnostics to detail.
	Container   *struct{} `json:"container"`
	StopDetails *struct{} `json:"stop_details"`
	Diagnostics *struct{} `json:"diagnostics"`
}

type msgBlockJSON struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text,omitempty"`
	Thinking  *string         `json:"thinking,omitempty"`
	Signature *string         `json:"signature,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	Citations *[]struct{}     `json:"citations,omitzero"` // text: present, null (none)
	Caller    *msgCaller      `json:"caller,omitempty"`   // tool_use: the model's own call
}

// msgCaller is who called a tool: a chat backend's tool call is the model's own ("direct").
type msgCaller struct {
	Type string `json:"type"`
}

type msgDelta struct {
	Type         string           `json:"type,omitempty"`
	Text         *string          `json:"text,omitempty"`
	Thinking     *string          `json:"thinking,omitempty"`
	PartialJSON  *string          `json:"partial_json,omitempty"`
	StopReason   *string          `json:"stop_reason,omitempty"`
	StopSequence *json.RawMessage `json:"stop_sequence,omitempty"`
}

// msgUsage is Anthropic's usage. A chat answer reports no cache writes (0), and nothing of
// server tools, service tier, region, speed or an output breakdown (null).
type msgUsage struct {
	InputTokens              int       `json:"input_tokens"`
	OutputTokens             int       `json:"output_tokens"`
	CacheReadInputTokens     int       `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int       `json:"cache_creation_input_tokens"`
	CacheCreation            *struct{} `json:"cache_creation"`
	ServerToolUse            *struct{} `json:"server_tool_use"`
	ServiceTier              *string   `json:"service_tier"`
	InferenceGeo             *string   `json:"inference_geo"`
	Speed                    *string   `json:"speed"`
	OutputTokensDetails      *struct{} `json:"output_tokens_details"`
}
