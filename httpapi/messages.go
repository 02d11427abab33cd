package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/tollgate/tollgate/providers/llm"
)

// POST /v1/messages: Anthropic's Messages API as Claude Code and the Anthropic SDKs send it,
// translated to the chat vocabulary so every backend can serve it; an Anthropic backend gets
// the client's body as sent (llm.Native), with its anthropic-beta and anthropic-version.

// messagesRequest is the part of a Messages request the translation reads. Fields it does not
// model (context_management, output_config, cache_control, ...) only reach an Anthropic
// backend, in the native body.
type messagesRequest struct {
	Model         string            `json:"model"`
	MaxTokens     *int              `json:"max_tokens"`
	System        rawValue          `json:"system"`
	Messages      []messagesMessage `json:"messages"`
	StopSequences []string          `json:"stop_sequences"`
	Temperature   *float64          `json:"temperature"`
	TopP          *float64          `json:"top_p"`
	TopK          *int              `json:"top_k"`
	Stream        bool              `json:"stream"`
	Tools         []messagesTool    `json:"tools"`
	ToolChoice    *struct {
		Type                   string `json:"type"`
		Name                   string `json:"name"`
		DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
	} `json:"tool_choice"`
	Thinking *struct {
		Type         string `json:"type"`
		BudgetTokens *int   `json:"budget_tokens"`
	} `json:"thinking"`
	Metadata *struct {
		UserID string `json:"user_id"`
	} `json:"metadata"`
}

type messagesMessage struct {
	Role    string   `json:"role"`
	Content rawValue `json:"content"`
}

type messagesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// messagesBlock is one content block; the type decides which fields are set.
type messagesBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	Source    *messagesSource `json:"source"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     rawValue        `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   rawValue        `json:"content"` // tool_result: a string or blocks
	IsError   bool            `json:"is_error"`
}

type messagesSource struct {
	Type      string `json:"type"` // base64 or url
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
	URL       string `json:"url"`
}

// nativeHeaders are the Anthropic headers an Anthropic backend receives as the client sent them.
var nativeHeaders = []string{"Anthropic-Beta", "Anthropic-Version"}

// parseMessages decodes and validates a Messages body into a chat request carrying the body
// (and its Anthropic headers) as its native form.
func parseMessages(body []byte, r *http.Request) (*llm.Request, *apiError) {
	return decodeMessages(body, r, false)
}

// decodeMessages is parseMessages; count is set for count_tokens, which takes no max_tokens.
func decodeMessages(body []byte, r *http.Request, count bool) (*llm.Request, *apiError) {
	var in messagesRequest
	trimmed, a := decodeObject(body, &in)
	if a != nil {
		return nil, a
	}
	if count && in.MaxTokens == nil {
		in.MaxTokens = new(1)
	}
	if a := checkMessages(&in); a != nil {
		return nil, a
	}
	native := &llm.Native{Format: llm.FormatMessages, Body: trimmed, Header: map[string]string{}}
	for _, h := range nativeHeaders {
		if v := r.Header.Get(h); v != "" {
			native.Header[h] = v
		}
	}
	req := &llm.Request{Model: in.Model, Stream: in.Stream, MaxTokens: in.MaxTokens, Temperature: in.Temperature,
		TopP: in.TopP, Stop: in.StopSequences, Native: native}
	if in.Metadata != nil {
		req.User = in.Metadata.UserID
	}
	if err := systemMessage(req, "system", json.RawMessage(in.System)); err != nil {
		return nil, err
	}
	calls := callIDs{}
	for i, m := range in.Messages {
		if err := chatMessages(req, calls, i, m); err != nil {
			return nil, err
		}
	}
	if err := messagesTools(req, &in); err != nil {
		return nil, err
	}
	req.ReasoningEffort = thinkingEffort(&in)
	return req, nil
}

// checkMessages checks the required fields and the ranges Anthropic allows.
func checkMessages(in *messagesRequest) *apiError {
	switch {
	case in.Model == "":
		return invalidf("model", "missing required field: model")
	case in.MaxTokens == nil:
		return invalidf("max_tokens", "missing required field: max_tokens (the most tokens the answer may have, at least 1)")
	case len(in.Messages) == 0:
		return invalidf("messages", "missing required field: messages (a non-empty array of messages)")
	}
	if a := checkThinking(in); a != nil {
		return a
	}
	var topK *float64
	if in.TopK != nil {
		topK = new(float64(*in.TopK))
	}
	return firstError(
		checkTokens("max_tokens", in.MaxTokens, 1),
		checkRange("temperature", in.Temperature, 0, 1),
		checkRange("top_p", in.TopP, 0, 1),
		checkRange("top_k", topK, 0, -1),
	)
}

// minThinkingBudget is the smallest thinking.budget_tokens Anthropic takes.
const minThinkingBudget = 1024

// checkThinking checks thinking: its type, and the budget enabled thinking requires.
func checkThinking(in *messagesRequest) *apiError {
	t := in.Thinking
	if t == nil {
		return nil
	}
	switch t.Type {
	case "enabled", "disabled", "adaptive":
	default:
		return invalidf("thinking.type", "thinking.type %q is not one of enabled, disabled, adaptive", t.Type)
	}
	if t.Type != "enabled" {
		return nil // its budget, if any, is not read: the backend's to refuse
	}
	if t.BudgetTokens == nil {
		return invalidf("thinking.budget_tokens", "missing required field: thinking.budget_tokens (at least %d when thinking.type is enabled)", minThinkingBudget)
	}
	return checkTokens("thinking.budget_tokens", t.BudgetTokens, minThinkingBudget)
}

// systemMessage appends the system prompt (a string or text blocks) as a system message.
func systemMessage(req *llm.Request, param string, raw json.RawMessage) *apiError {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	blocks, err := messageBlocks(param, raw)
	if err != nil {
		return err
	}
	var text []string
	for j, b := range blocks {
		if b.Type != "text" {
			return invalidf(fmt.Sprintf("%s[%d].type", param, j), "%s[%d]: a system prompt holds text blocks only, not %q", param, j, b.Type)
		}
		if b.Text != "" {
			text = append(text, b.Text)
		}
	}
	if len(text) > 0 {
		req.Messages = append(req.Messages, llm.Message{Role: "system", Content: llm.Content{Text: strings.Join(text, "\n\n")}})
	}
	return nil
}

// messageBlocks reads a content value: a string is one text block.
func messageBlocks(param string, raw json.RawMessage) ([]messagesBlock, *apiError) {
	if s, ok := stringValue(raw); ok {
		return []messagesBlock{{Type: "text", Text: s}}, nil
	}
	var blocks []messagesBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, invalidf(param, "%s must be a string or an array of content blocks", param)
	}
	return blocks, nil
}

// chatMessages translates message i. A user turn's tool results become tool messages, which
// chat wants right after the assistant's calls, ahead of the turn's other content; an
// assistant turn's thinking becomes its reasoning_content and its tool_use blocks its calls.
// A system message inside messages (Claude Code sends one) stays a system message. calls
// holds the ids of the tool_use blocks so far: a tool_result must answer one of them.
func chatMessages(req *llm.Request, calls callIDs, i int, m messagesMessage) *apiError {
	param := fmt.Sprintf("messages[%d]", i)
	switch m.Role {
	case "user", "assistant":
	case "system":
		return systemMessage(req, param+".content", json.RawMessage(m.Content))
	case "":
		return invalidf(param+".role", "%s.role is missing", param)
	default:
		return invalidf(param+".role", "%s.role %q is not one of user, assistant, system", param, m.Role)
	}
	blocks, err := messageBlocks(param+".content", json.RawMessage(m.Content))
	if err != nil {
		return err
	}
	msg := llm.Message{Role: m.Role}
	var parts []llm.Part
	for j, b := range blocks {
		bp := fmt.Sprintf("%s.content[%d]", param, j)
		switch {
		case b.Type == "text":
			parts = append(parts, llm.Part{Type: "text", Text: b.Text})
		case b.Type == "image":
			p, err := imagePart(bp, b.Source)
			if err != nil {
				return err
			}
			parts = append(parts, p)
		case b.Type == "tool_use" && m.Role == "assistant":
			if b.ID == "" || b.Name == "" {
				return invalidf(bp, "%s: a tool_use block needs id and name", bp)
			}
			calls[b.ID] = true
			msg.ToolCalls = append(msg.ToolCalls, llm.ToolCall{ID: b.ID, Type: "function",
				Function: llm.FunctionCall{Name: b.Name, Arguments: compactJSON(json.RawMessage(b.Input))}})
		case b.Type == "thinking" && m.Role == "assistant":
			msg.ReasoningContent += b.Thinking
		case b.Type == "redacted_thinking" && m.Role == "assistant":
			// encrypted for Anthropic's eyes only: nothing another backend can read
		case b.Type == "tool_result" && m.Role == "user":
			if b.ToolUseID == "" {
				return invalidf(bp+".tool_use_id", "%s.tool_use_id is required", bp)
			}
			if !calls[b.ToolUseID] {
				return invalidf(bp+".tool_use_id", "%s.tool_use_id %q names no tool_use block of an earlier assistant message", bp, b.ToolUseID)
			}
			text, images, err := toolResult(bp+".content", b)
			if err != nil {
				return err
			}
			req.Messages = append(req.Messages, llm.Message{Role: "tool", ToolCallID: b.ToolUseID, Content: llm.Content{Text: text}})
			parts = append(parts, images...) // chat tool messages hold text: images follow in the user turn
		default:
			return invalidf(bp+".type", "%s.type %q is not supported in a %s message (text, image, tool_use, tool_result, thinking)", bp, b.Type, m.Role)
		}
	}
	appendMessage(req, msg, parts, len(blocks))
	return nil
}

// appendMessage appends msg, of a turn of blocks blocks, with parts as its content: one text
// part is a plain string. A user turn of tool results only is not appended: the tool messages
// are the turn.
func appendMessage(req *llm.Request, msg llm.Message, parts []llm.Part, blocks int) {
	switch {
	case len(parts) == 1 && parts[0].Type == "text":
		msg.Content = llm.Content{Text: parts[0].Text}
	case len(parts) > 0:
		msg.Content = llm.Content{Parts: parts}
	case len(msg.ToolCalls) == 0 && msg.ReasoningContent == "" && blocks > 0:
		return
	}
	req.Messages = append(req.Messages, msg)
}

// toolResult reads a tool_result's content into text and the images it holds.
func toolResult(param string, b messagesBlock) (string, []llm.Part, *apiError) {
	raw := bytes.TrimSpace(b.Content)
	var text []string
	var images []llm.Part
	if len(raw) > 0 && string(raw) != "null" {
		blocks, err := messageBlocks(param, raw)
		if err != nil {
			return "", nil, err
		}
		for j, c := range blocks {
			switch c.Type {
			case "text":
				text = append(text, c.Text)
			case "image":
				p, err := imagePart(fmt.Sprintf("%s[%d]", param, j), c.Source)
				if err != nil {
					return "", nil, err
				}
				images = append(images, p)
			default:
				return "", nil, invalidf(fmt.Sprintf("%s[%d].type", param, j), "%s[%d].type %q is not supported in a tool result (text, image)", param, j, c.Type)
			}
		}
	}
	out := strings.Join(text, "\n")
	if b.IsError {
		out = "Error: " + out
	}
	return out, images, nil
}

// imagePart is an image block as a chat image_url part (a data: URI for base64 data).
func imagePart(param string, src *messagesSource) (llm.Part, *apiError) {
	switch {
	case src == nil:
		return llm.Part{}, invalidf(param+".source", "%s.source is required", param)
	case src.Type == "base64" && src.MediaType != "" && src.Data != "":
		if badBase64(src.Data) {
			return llm.Part{}, invalidf(param+".source.data", "%s.source.data is not valid base64", param)
		}
		return llm.Part{Type: "image_url", ImageURL: &llm.ImageURL{URL: "data:" + src.MediaType + ";base64," + src.Data}}, nil
	case src.Type == "url" && src.URL != "":
		return llm.Part{Type: "image_url", ImageURL: &llm.ImageURL{URL: src.URL}}, nil
	}
	return llm.Part{}, invalidf(param+".source", "%s.source must be base64 (media_type, data) or url (url)", param)
}

// compactJSON is a tool_use input as chat arguments: compact JSON, {} when absent.
func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil || b.String() == "null" || b.Len() == 0 {
		return "{}"
	}
	return b.String()
}

// messagesTools translates client tools and tool_choice. Tools with a type (Anthropic's own:
// web search, code execution, computer use, ...) run inside Anthropic's service or need its
// trained schemas; a chat backend cannot run them, so the translation leaves them out.
func messagesTools(req *llm.Request, in *messagesRequest) *apiError {
	for i, t := range in.Tools {
		if t.Type != "" && t.Type != "custom" {
			continue
		}
		if t.Name == "" {
			return invalidf(fmt.Sprintf("tools[%d].name", i), "tools[%d].name is required", i)
		}
		schema := t.InputSchema
		if len(schema) == 0 || string(schema) == "null" {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		req.Tools = append(req.Tools, llm.Tool{Type: "function",
			Function: llm.ToolFunction{Name: t.Name, Description: t.Description, Parameters: schema}})
	}
	tc := in.ToolChoice
	if tc == nil {
		return nil
	}
	if tc.DisableParallelToolUse {
		req.ParallelToolCalls = new(false)
	}
	switch tc.Type {
	case "auto", "":
		req.ToolChoice = json.RawMessage(`"auto"`)
	case "any":
		req.ToolChoice = json.RawMessage(`"required"`)
	case "none":
		req.ToolChoice = json.RawMessage(`"none"`)
	case "tool":
		if tc.Name == "" {
			return invalidf("tool_choice.name", "tool_choice.name is required when tool_choice.type is tool")
		}
		b, _ := json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": tc.Name}})
		req.ToolChoice = b
	default:
		return invalidf("tool_choice.type", "tool_choice.type %q is not one of auto, any, tool, none", tc.Type)
	}
	return nil
}

// thinkingEffort maps thinking onto chat's reasoning_effort: the budget picks the effort
// (the inverse of the Anthropic adapter's budgets); adaptive thinking is medium.
func thinkingEffort(in *messagesRequest) string {
	t := in.Thinking
	switch {
	case t == nil || t.Type == "disabled":
		return ""
	case t.Type != "enabled":
		return "medium"
	case *t.BudgetTokens >= 16384:
		return "high"
	case *t.BudgetTokens >= 4096:
		return "medium"
	}
	return "low"
}
