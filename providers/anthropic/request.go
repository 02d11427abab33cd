package anthropic

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tollgate/tollgate/providers/llm"
)

// The body of POST /v1/messages, as far as an OpenAI chat request can fill it.
type messagesRequest struct {
	Model         string      `json:"model"`
	MaxTokens     int         `json:"max_tokens"`
	System        string      `json:"system,omitempty"`
	Messages      []message   `json:"messages"`
	StopSequences []string    `json:"stop_sequences,omitempty"`
	Temperature   *float64    `json:"temperature,omitempty"`
	TopP          *float64    `json:"top_p,omitempty"`
	Stream        bool        `json:"stream,omitempty"`
	Tools         []tool      `json:"tools,omitempty"`
	ToolChoice    *toolChoice `json:"tool_choice,omitempty"`
	Thinking      *thinking   `json:"thinking,omitempty"`
	Metadata      *metadata   `json:"metadata,omitempty"`
}

// metadata is what Anthropic takes about the request's end user: chat's user.
type metadata struct {
	UserID string `json:"user_id"`
}

type message struct {
	Role    string  `json:"role"` // "user" or "assistant"
	Content []block `json:"content"`
}

// block is any content block; the type decides which fields are set.
type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	Source    *imageSource    `json:"source,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   []block         `json:"content,omitempty"` // tool_result only
}

type imageSource struct {
	Type      string `json:"type"` // "base64" or "url"
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

type tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type toolChoice struct {
	Type string `json:"type"` // auto, any, tool, none
	Name string `json:"name,omitempty"`
	// DisableParallelToolUse is chat's parallel_tool_calls: false (not valid with none).
	DisableParallelToolUse bool `json:"disable_parallel_tool_use,omitempty"`
}

type thinking struct {
	Type         string `json:"type"` // "enabled"
	BudgetTokens int    `json:"budget_tokens"`
}

const (
	// defaultMaxTokens is sent when the client set no output limit: Anthropic requires one.
	defaultMaxTokens = 4096
	// minThinkingBudget is the smallest budget_tokens Anthropic accepts.
	minThinkingBudget = 1024
)

// thinkingBudgets maps OpenAI's reasoning_effort onto budget_tokens. "none" (and an absent
// effort) leaves thinking off; "minimal" gets the smallest budget Anthropic accepts.
var thinkingBudgets = map[string]int{
	"minimal": minThinkingBudget,
	"low":     1024,
	"medium":  4096,
	"high":    16384,
	"xhigh":   32768,
	"max":     32768,
}

// emptySchema stands in for a tool without parameters: input_schema is required.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// buildRequest translates an OpenAI chat request into a Messages API body. Problems with the
// client's request come back as *llm.Error of KindInvalidRequest naming the field.
func buildRequest(req *llm.Request) (*messagesRequest, error) {
	out := &messagesRequest{Model: req.Model, Stream: req.Stream, StopSequences: req.Stop, TopP: req.TopP}
	if err := translateMessages(out, req.Messages); err != nil {
		return nil, err
	}
	if err := translateTools(out, req); err != nil {
		return nil, err
	}
	if req.User != "" {
		out.Metadata = &metadata{UserID: req.User}
	}
	if t := req.Temperature; t != nil {
		// OpenAI allows 0..2, Anthropic 0..1; clamping keeps "as random as possible" meaning.
		out.Temperature = new(min(*t, 1))
	}
	return out, applyLimits(out, req)
}

// applyLimits sets max_tokens and thinking. OpenAI's limit counts reasoning tokens too, so a
// client limit also caps the thinking budget, which Anthropic requires to be below max_tokens.
func applyLimits(out *messagesRequest, req *llm.Request) error {
	budget := 0
	if e := req.ReasoningEffort; e != "" && e != "none" {
		b, ok := thinkingBudgets[e]
		if !ok {
			return &llm.Error{Kind: llm.KindInvalidRequest, Param: "reasoning_effort",
				Message: fmt.Sprintf("reasoning_effort %q is not supported", e)}
		}
		budget = b
	}
	if tc := out.ToolChoice; tc != nil && (tc.Type == "any" || tc.Type == "tool") {
		// Anthropic refuses thinking together with forced tool use. The client's tool_choice
		// decides what the answer is, thinking only how it is reached: thinking yields.
		budget = 0
	}
	limit := req.OutputLimit()
	switch {
	case limit <= 0:
		limit = defaultMaxTokens + budget
	case budget >= limit:
		budget = limit / 2 // leave half of the client's limit for the answer
	}
	out.MaxTokens = limit
	if budget < minThinkingBudget {
		return nil // no thinking asked for, or the limit is too small to afford any
	}
	out.Thinking = &thinking{Type: "enabled", BudgetTokens: budget}
	// Extended thinking rejects a modified temperature and top_p below 0.95.
	out.Temperature = nil
	if out.TopP != nil && *out.TopP < 0.95 {
		out.TopP = nil
	}
	return nil
}

// translateMessages moves system and developer messages to the top-level system prompt and
// turns the rest into alternating user/assistant messages of content blocks.
func translateMessages(out *messagesRequest, msgs []llm.Message) error {
	var system []string
	for i, m := range msgs {
		var role string
		var blocks []block
		var err error
		switch m.Role {
		case "system", "developer":
			if t := m.Content.PlainText(); t != "" {
				system = append(system, t)
			}
			continue
		case "user":
			role = "user"
			blocks, err = contentBlocks(m.Content, fmt.Sprintf("messages[%d].content", i))
		case "assistant":
			role = "assistant"
			blocks, err = assistantBlocks(m, i)
		case "tool":
			role = "user"
			blocks, err = toolResultBlocks(m, i)
		default:
			return invalid(fmt.Sprintf("messages[%d].role", i), "role %q is not supported", m.Role)
		}
		if err != nil {
			return err
		}
		if len(blocks) == 0 {
			continue // Anthropic rejects empty messages; an empty turn carries nothing anyway
		}
		// Anthropic wants alternating roles: a tool result followed by a user note, or two
		// user messages in a row, become one user message.
		if n := len(out.Messages); n > 0 && out.Messages[n-1].Role == role {
			out.Messages[n-1].Content = append(out.Messages[n-1].Content, blocks...)
			continue
		}
		out.Messages = append(out.Messages, message{Role: role, Content: blocks})
	}
	out.System = strings.Join(system, "\n\n")
	if out.Messages == nil {
		out.Messages = []message{}
	}
	return nil
}

// contentBlocks turns OpenAI content (a string or parts) into text and image blocks.
func contentBlocks(c llm.Content, param string) ([]block, error) {
	if c.Parts == nil {
		if c.Text == "" {
			return nil, nil
		}
		return []block{{Type: "text", Text: c.Text}}, nil
	}
	var blocks []block
	for j, p := range c.Parts {
		switch p.Type {
		case "text":
			if p.Text != "" {
				blocks = append(blocks, block{Type: "text", Text: p.Text})
			}
		case "image_url":
			if p.ImageURL == nil {
				return nil, invalid(fmt.Sprintf("%s[%d].image_url", param, j), "image_url is missing")
			}
			src, err := imageFromURL(p.ImageURL.URL)
			if err != nil {
				return nil, invalid(fmt.Sprintf("%s[%d].image_url.url", param, j), "%v", err)
			}
			blocks = append(blocks, block{Type: "image", Source: src})
		default:
			return nil, invalid(fmt.Sprintf("%s[%d].type", param, j), "content part type %q is not supported", p.Type)
		}
	}
	return blocks, nil
}

// imageFromURL reads a data: URI into a base64 source and passes http(s) URLs by reference.
func imageFromURL(u string) (*imageSource, error) {
	if strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://") {
		return &imageSource{Type: "url", URL: u}, nil
	}
	mediaType, data, ok := parseDataURI(u)
	if !ok {
		return nil, fmt.Errorf("image url must be http(s) or a base64 data: URI")
	}
	return &imageSource{Type: "base64", MediaType: mediaType, Data: data}, nil
}

// parseDataURI splits "data:image/png;base64,AAAA" into its media type and payload.
func parseDataURI(u string) (mediaType, data string, ok bool) {
	rest, found := strings.CutPrefix(u, "data:")
	if !found {
		return "", "", false
	}
	meta, data, found := strings.Cut(rest, ",")
	if !found {
		return "", "", false
	}
	mediaType, found = strings.CutSuffix(meta, ";base64")
	if !found || mediaType == "" {
		return "", "", false
	}
	return mediaType, data, true
}

// assistantBlocks turns an assistant turn into text and tool_use blocks. Earlier reasoning is
// dropped: Anthropic only accepts thinking blocks with the signature it issued, which an
// OpenAI client never has.
func assistantBlocks(m llm.Message, i int) ([]block, error) {
	blocks, err := contentBlocks(m.Content, fmt.Sprintf("messages[%d].content", i))
	if err != nil {
		return nil, err
	}
	for j, tc := range m.ToolCalls {
		input, ok := tc.Function.ArgumentsObject()
		if !ok {
			return nil, invalid(fmt.Sprintf("messages[%d].tool_calls[%d].function.arguments", i, j),
				"arguments must be a JSON object")
		}
		blocks = append(blocks, block{Type: "tool_use", ID: tc.ID, Name: tc.Function.Name, Input: input})
	}
	return blocks, nil
}

// toolResultBlocks turns a tool message into a tool_result block for the user turn.
func toolResultBlocks(m llm.Message, i int) ([]block, error) {
	if m.ToolCallID == "" {
		return nil, invalid(fmt.Sprintf("messages[%d].tool_call_id", i), "tool message without tool_call_id")
	}
	inner, err := contentBlocks(m.Content, fmt.Sprintf("messages[%d].content", i))
	if err != nil {
		return nil, err
	}
	return []block{{Type: "tool_result", ToolUseID: m.ToolCallID, Content: inner}}, nil
}

// translateTools maps function tools, tool_choice and parallel_tool_calls.
func translateTools(out *messagesRequest, req *llm.Request) error {
	if err := translateToolChoice(out, req); err != nil {
		return err
	}
	if p := req.ParallelToolCalls; p != nil && !*p && len(out.Tools) > 0 {
		// Anthropic says it on tool_choice, which it then needs: auto is chat's default.
		if out.ToolChoice == nil {
			out.ToolChoice = &toolChoice{Type: "auto"}
		}
		out.ToolChoice.DisableParallelToolUse = out.ToolChoice.Type != "none"
	}
	return nil
}

// translateToolChoice maps function tools and tool_choice itself.
func translateToolChoice(out *messagesRequest, req *llm.Request) error {
	for i, t := range req.Tools {
		if t.Type != "function" && t.Type != "" {
			return invalid(fmt.Sprintf("tools[%d].type", i), "tool type %q is not supported", t.Type)
		}
		schema := t.Function.Parameters
		if len(schema) == 0 || string(schema) == "null" {
			schema = emptySchema
		}
		out.Tools = append(out.Tools, tool{Name: t.Function.Name, Description: t.Function.Description, InputSchema: schema})
	}
	if len(req.ToolChoice) == 0 || string(req.ToolChoice) == "null" {
		return nil
	}
	var mode string
	if json.Unmarshal(req.ToolChoice, &mode) == nil {
		switch mode {
		case "auto", "none":
			out.ToolChoice = &toolChoice{Type: mode}
		case "required":
			out.ToolChoice = &toolChoice{Type: "any"}
		default:
			return invalid("tool_choice", "tool_choice %q is not supported", mode)
		}
		return nil
	}
	var named struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(req.ToolChoice, &named); err != nil || named.Function.Name == "" {
		return invalid("tool_choice", "tool_choice must be a string or name a function")
	}
	out.ToolChoice = &toolChoice{Type: "tool", Name: named.Function.Name}
	return nil
}

func invalid(param, format string, args ...any) *llm.Error {
	return &llm.Error{Kind: llm.KindInvalidRequest, Param: param, Message: fmt.Sprintf(format, args...)}
}
