package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/sse"
)

// usage is Anthropic's usage object. input_tokens excludes cached prompt tokens, which are
// counted apart; OpenAI's prompt_tokens includes them.
type usage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

// merge takes the counts a later usage object reports; message_delta repeats some as totals.
func (u *usage) merge(v usage) {
	for _, p := range [...]struct {
		dst *int
		src int
	}{
		{&u.InputTokens, v.InputTokens}, {&u.OutputTokens, v.OutputTokens},
		{&u.CacheCreationInputTokens, v.CacheCreationInputTokens}, {&u.CacheReadInputTokens, v.CacheReadInputTokens},
	} {
		if p.src != 0 {
			*p.dst = p.src
		}
	}
}

func (u usage) toLLM() *llm.Usage {
	prompt := u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
	return &llm.Usage{PromptTokens: prompt, CompletionTokens: u.OutputTokens,
		TotalTokens: prompt + u.OutputTokens, CachedTokens: u.CacheReadInputTokens}
}

// finishReason maps stop_reason onto OpenAI's finish reasons.
func finishReason(stop string) llm.FinishReason {
	switch stop {
	case "":
		return llm.FinishNone
	case "max_tokens", "model_context_window_exceeded":
		return llm.FinishLength
	case "tool_use":
		return llm.FinishToolCalls
	case "refusal":
		return llm.FinishContentFilter
	}
	return llm.FinishStop // end_turn, stop_sequence, pause_turn and anything new
}

// streamEvent is the union of the Messages stream's event payloads.
type streamEvent struct {
	Type    string `json:"type"`
	Message *struct {
		Usage usage `json:"usage"`
	} `json:"message"`
	Index        int `json:"index"`
	ContentBlock *struct {
		Type     string `json:"type"`
		ID       string `json:"id"`
		Name     string `json:"name"`
		Text     string `json:"text"`
		Thinking string `json:"thinking"`
	} `json:"content_block"`
	Delta *struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Thinking    string `json:"thinking"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage *usage    `json:"usage"`
	Error *apiError `json:"error"`
}

// decoder turns Messages stream events into chunks. It keeps the state the events refer
// back to: which content block is which tool call, and the usage so far.
type decoder struct {
	errorf    func(*apiError) *llm.Error // builds the error for an in-stream error event
	toolIndex map[int]int                // content block index → OpenAI tool call index
	toolArgs  map[int]bool               // tool call index → some arguments were streamed
	usage     usage
	started   bool // an event was decoded: a stream ending now cuts an answer off
	done      bool // message_stop seen: the answer is complete
}

func newDecoder(errorf func(*apiError) *llm.Error) *decoder {
	return &decoder{errorf: errorf, toolIndex: map[int]int{}, toolArgs: map[int]bool{}}
}

// Event decodes one SSE event and appends the chunks it yields to out.
func (d *decoder) Event(ev sse.Event, out []llm.Chunk) ([]llm.Chunk, error) {
	var e streamEvent
	if err := json.Unmarshal(ev.Data, &e); err != nil {
		return out, &llm.Error{Kind: llm.KindUpstream, Message: fmt.Sprintf("bad %q event: %v", ev.Type, err), Err: err}
	}
	if e.Type == "" {
		e.Type = ev.Type
	}
	d.started = true
	switch e.Type {
	case "message_start":
		if e.Message != nil {
			d.usage.merge(e.Message.Usage)
		}
		out = append(out, llm.Chunk{Role: "assistant"})
	case "content_block_start":
		out = d.blockStart(&e, out)
	case "content_block_delta":
		out = d.blockDelta(&e, out)
	case "content_block_stop":
		// A tool called without arguments streams no input_json_delta; OpenAI clients
		// expect a JSON object all the same.
		if ti, ok := d.toolIndex[e.Index]; ok && !d.toolArgs[ti] {
			d.toolArgs[ti] = true
			out = append(out, llm.Chunk{ToolCalls: []llm.ToolCallDelta{{Index: ti, Arguments: "{}"}}})
		}
	case "message_delta":
		if e.Usage != nil {
			d.usage.merge(*e.Usage)
		}
		if e.Delta != nil && e.Delta.StopReason != "" {
			out = append(out, llm.Chunk{FinishReason: finishReason(e.Delta.StopReason)})
		}
	case "message_stop":
		d.done = true
		out = append(out, llm.Chunk{UsageOnly: true, Usage: d.usage.toLLM()})
	case "error":
		ae := e.Error
		if ae == nil {
			ae = &apiError{Type: "api_error", Message: "error event without details"}
		}
		return out, d.errorf(ae)
	}
	// ping and event types added after this code was written carry nothing for the client.
	return out, nil
}

func (d *decoder) blockStart(e *streamEvent, out []llm.Chunk) []llm.Chunk {
	cb := e.ContentBlock
	if cb == nil {
		return out
	}
	switch cb.Type {
	case "text":
		if cb.Text != "" {
			out = append(out, llm.Chunk{Content: cb.Text})
		}
	case "thinking":
		if cb.Thinking != "" {
			out = append(out, llm.Chunk{ReasoningContent: cb.Thinking})
		}
	case "tool_use":
		ti := len(d.toolIndex)
		d.toolIndex[e.Index] = ti
		out = append(out, llm.Chunk{ToolCalls: []llm.ToolCallDelta{{Index: ti, ID: cb.ID, Type: "function", Name: cb.Name}}})
	}
	return out
}

func (d *decoder) blockDelta(e *streamEvent, out []llm.Chunk) []llm.Chunk {
	dl := e.Delta
	if dl == nil {
		return out
	}
	switch dl.Type {
	case "text_delta":
		if dl.Text != "" {
			out = append(out, llm.Chunk{Content: dl.Text})
		}
	case "thinking_delta":
		if dl.Thinking != "" {
			out = append(out, llm.Chunk{ReasoningContent: dl.Thinking})
		}
	case "input_json_delta":
		ti, ok := d.toolIndex[e.Index]
		if ok && dl.PartialJSON != "" {
			d.toolArgs[ti] = true
			out = append(out, llm.Chunk{ToolCalls: []llm.ToolCallDelta{{Index: ti, Arguments: dl.PartialJSON}}})
		}
	}
	// signature_delta and citations_delta have no OpenAI counterpart.
	return out
}

// messageResponse is a non-streaming Messages API answer.
type messageResponse struct {
	Type    string `json:"type"`
	Content []struct {
		Type     string          `json:"type"`
		Text     string          `json:"text"`
		Thinking string          `json:"thinking"`
		ID       string          `json:"id"`
		Name     string          `json:"name"`
		Input    json.RawMessage `json:"input"`
	} `json:"content"`
	StopReason string `json:"stop_reason"`
	Usage      usage  `json:"usage"`
}

// decodeMessage turns a whole answer into one chunk with everything the message says, then
// a usage chunk: the same pieces a stream would yield, for the gateway to assemble.
func decodeMessage(body []byte) ([]llm.Chunk, error) {
	var m messageResponse
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, &llm.Error{Kind: llm.KindUpstream, Message: "bad message body: " + err.Error(), Err: err}
	}
	if m.Type != "" && m.Type != "message" {
		return nil, &llm.Error{Kind: llm.KindUpstream, Message: fmt.Sprintf("unexpected answer of type %q", m.Type)}
	}
	if m.Type == "" && len(m.Content) == 0 && m.StopReason == "" {
		// Not a message: a proxy's or a vendor's own body ({"code":…}, {"error_code":…}) in a
		// 200. Relayed as an empty success it would hide the failure. No snippet: the body
		// may quote our key.
		return nil, &llm.Error{Kind: llm.KindUpstream,
			Message: "backend answered 200 with a JSON body that is not a message (no type, content or stop_reason)"}
	}
	c := llm.Chunk{Role: "assistant", FinishReason: finishReason(m.StopReason)}
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			c.Content += b.Text
		case "thinking":
			c.ReasoningContent += b.Thinking
		case "tool_use":
			args := "{}"
			var buf bytes.Buffer
			if json.Compact(&buf, b.Input) == nil && buf.String() != "null" {
				args = buf.String()
			}
			c.ToolCalls = append(c.ToolCalls, llm.ToolCallDelta{Index: len(c.ToolCalls), ID: b.ID,
				Type: "function", Name: b.Name, Arguments: args})
		}
	}
	return []llm.Chunk{c, {UsageOnly: true, Usage: m.Usage.toLLM()}}, nil
}
