package httpapi

import (
	"encoding/json"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// chunkEncoder writes structured chunks as OpenAI chat.completion.chunk JSON. Every chunk of
// a stream shares its id, created time and model.
type chunkEncoder struct {
	id, model string
	created   int64
}

func newChunkEncoder(requestID, model string, now time.Time) chunkEncoder {
	return chunkEncoder{id: "chatcmpl-" + requestID, model: model, created: now.Unix()}
}

type wireChunk struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []wireChoice `json:"choices"`
	Usage   *wireUsage   `json:"usage,omitempty"`
}

type wireChoice struct {
	Index        int               `json:"index"`
	Delta        wireDelta         `json:"delta"`
	FinishReason *llm.FinishReason `json:"finish_reason"`
}

type wireDelta struct {
	Role             string         `json:"role,omitempty"`
	Content          *string        `json:"content,omitempty"`
	ReasoningContent string         `json:"reasoning_content,omitempty"`
	ToolCalls        []wireToolCall `json:"tool_calls,omitempty"`
}

type wireToolCall struct {
	Index    int          `json:"index"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type wireUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

func toWireUsage(u *llm.Usage) *wireUsage {
	w := &wireUsage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
	if w.TotalTokens == 0 {
		w.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	w.PromptTokensDetails.CachedTokens = u.CachedTokens
	w.CompletionTokensDetails.ReasoningTokens = u.ReasoningTokens
	return w
}

func (e *chunkEncoder) chunk(ch *llm.Chunk) []byte {
	c := wireChoice{Index: ch.Index, Delta: wireDelta{Role: ch.Role, ReasoningContent: ch.ReasoningContent}}
	if ch.Content != "" || ch.Role != "" {
		content := ch.Content
		c.Delta.Content = &content
	}
	for _, t := range ch.ToolCalls {
		c.Delta.ToolCalls = append(c.Delta.ToolCalls, wireToolCall{Index: t.Index, ID: t.ID, Type: t.Type,
			Function: wireFunction{Name: t.Name, Arguments: t.Arguments}})
	}
	if ch.FinishReason != "" {
		fr := ch.FinishReason
		c.FinishReason = &fr
	}
	b, _ := json.Marshal(wireChunk{ID: e.id, Object: "chat.completion.chunk", Created: e.created, Model: e.model,
		Choices: []wireChoice{c}})
	return b
}

// usage is the final include_usage chunk: no choices, the whole stream's usage.
func (e *chunkEncoder) usage(u *llm.Usage) []byte {
	b, _ := json.Marshal(wireChunk{ID: e.id, Object: "chat.completion.chunk", Created: e.created, Model: e.model,
		Choices: []wireChoice{}, Usage: toWireUsage(u)})
	return b
}

// wire is the data of the SSE event that relays ch, or nil when ch is not sent: a raw
// usage-only chunk the client did not ask for, or a structured chunk that carries nothing
// but usage, which is kept in *usage to be sent last (enc.usage) when the client asked.
func (e *chunkEncoder) wire(ch *llm.Chunk, req *llm.Request, usage **llm.Usage) []byte {
	if ch.Raw != nil {
		if ch.UsageOnly && !req.WantsUsage() {
			return nil
		}
		return ch.Raw
	}
	if ch.Usage != nil {
		*usage = ch.Usage
	}
	if ch.Role == "" && ch.Content == "" && ch.ReasoningContent == "" && ch.ToolCalls == nil && ch.FinishReason == "" {
		return nil
	}
	return e.chunk(ch)
}
