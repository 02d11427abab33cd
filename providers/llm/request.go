// Package llm is the vocabulary shared by the gateway and its backends: a chat request, the
// chunks a backend streams back, usage, finish reasons and the kinds of error. It depends on
// the standard library only, so every adapter and the HTTP layer can import it freely.
package llm

import (
	"bytes"
	"encoding/json"
	"reflect"
)

// Request is an OpenAI Chat Completions request as the gateway hands it to a backend. The
// JSON tags follow OpenAI's wire names so the HTTP layer decodes a client body straight into it.
type Request struct {
	// Model is the client's model id ("provider/model") as decoded; the gateway replaces it
	// with the backend's own model name before a backend sees the request.
	Model    string    `json:"model"`
	Messages []Message `json:"messages"`

	Stream        bool           `json:"stream,omitempty"`
	StreamOptions *StreamOptions `json:"stream_options,omitempty"`

	MaxTokens           *int            `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int            `json:"max_completion_tokens,omitempty"`
	Temperature         *float64        `json:"temperature,omitempty"`
	TopP                *float64        `json:"top_p,omitempty"`
	Stop                Stop            `json:"stop,omitempty"`
	Tools               []Tool          `json:"tools,omitempty"`
	ToolChoice          json.RawMessage `json:"tool_choice,omitempty"`
	ReasoningEffort     string          `json:"reasoning_effort,omitempty"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls,omitempty"`
	ResponseFormat      json.RawMessage `json:"response_format,omitempty"`
	User                string          `json:"user,omitempty"`

	// N, the penalties and the log-probability fields are range-checked by the HTTP layer;
	// OpenAI-compatible backends receive them as sent; the translating adapters do not send them.
	N                *int     `json:"n,omitempty"`
	PresencePenalty  *float64 `json:"presence_penalty,omitempty"`
	FrequencyPenalty *float64 `json:"frequency_penalty,omitempty"`
	Logprobs         *bool    `json:"logprobs,omitempty"`
	TopLogprobs      *int     `json:"top_logprobs,omitempty"`

	// Body is the client's request body exactly as received (a JSON object). OpenAI-compatible
	// adapters forward it with only "model" replaced, so parameters this struct does not model
	// still reach the backend. Nil when the request was built in code.
	Body []byte `json:"-"`
	// Native, when set, is the client's request in the format it was sent in (Responses,
	// Messages); the fields above are its translation to chat. See Native.
	Native *Native `json:"-"`
	// Embed, for an embeddings call (Native.Format FormatEmbeddings), is its inputs as read.
	Embed *Embed `json:"-"`
	// Completion, for a legacy completions call (Native.Format FormatCompletions), is its
	// prompt as read; its output cap is MaxTokens.
	Completion *Completion `json:"-"`
	// Task is the client's X-Gateway-Task header, which routes may match on (SPEC §12); ""
	// when it sent none. It is never sent to a backend.
	Task string `json:"-"`
	// Conversation names the client's conversation for session affinity (SPEC §19): the
	// first of prompt_cache_key, the Codex session header, Claude Code's session header,
	// Anthropic metadata.user_id and OpenAI user that it sent; "" for none. It is never
	// sent to a backend as this field.
	Conversation string `json:"-"`
}

// StreamOptions mirrors OpenAI's stream_options.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage,omitempty"`
}

// WantsUsage reports whether the client asked for a final usage chunk on a stream.
func (r *Request) WantsUsage() bool { return r.StreamOptions != nil && r.StreamOptions.IncludeUsage }

// OutputLimit returns the client's cap on generated tokens (max_completion_tokens, else
// max_tokens), or 0 when it set none.
func (r *Request) OutputLimit() int {
	switch {
	case r.MaxCompletionTokens != nil:
		return *r.MaxCompletionTokens
	case r.MaxTokens != nil:
		return *r.MaxTokens
	}
	return 0
}

// Message is one chat message.
type Message struct {
	Role       string     `json:"role"`
	Content    Content    `json:"content"`
	Name       string     `json:"name,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	// ReasoningContent is an assistant's earlier reasoning, when a client sends it back.
	ReasoningContent string `json:"reasoning_content,omitempty"`
}

// Content is a message's content: either plain text or a list of parts. OpenAI accepts both
// a JSON string and an array of parts; null and absent decode to the zero value.
type Content struct {
	Text  string // used when Parts is nil
	Parts []Part
}

// Part is one element of an array-valued content.
type Part struct {
	Type     string    `json:"type"` // "text", "image_url", ...
	Text     string    `json:"text,omitempty"`
	ImageURL *ImageURL `json:"image_url,omitempty"`
}

// ImageURL is the image reference of an "image_url" part (a URL or a data: URI).
type ImageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

// PlainText returns the content's text: Text, or the text parts joined.
func (c Content) PlainText() string {
	if c.Parts == nil {
		return c.Text
	}
	var b bytes.Buffer
	for _, p := range c.Parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// UnmarshalJSON accepts a string, an array of parts or null.
func (c *Content) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	switch {
	case len(data) == 0 || bytes.Equal(data, []byte("null")):
		*c = Content{}
		return nil
	case data[0] == '"':
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		*c = Content{Text: s}
		return nil
	case data[0] == '[':
		var parts []Part
		if err := json.Unmarshal(data, &parts); err != nil {
			return err
		}
		if parts == nil {
			parts = []Part{}
		}
		*c = Content{Parts: parts}
		return nil
	}
	return typeError(data, reflect.TypeFor[Content]())
}

// typeError is the error of a value of the wrong JSON type. As an *json.UnmarshalTypeError
// it gets its field's path from the decoder that called UnmarshalJSON, and whoever reports
// it names the JSON types the field takes, not the Go type.
func typeError(data []byte, t reflect.Type) error {
	got := "number"
	switch {
	case len(data) == 0:
		got = "nothing"
	case data[0] == '{':
		got = "object"
	case data[0] == '[':
		got = "array"
	case data[0] == '"':
		got = "string"
	case data[0] == 't' || data[0] == 'f':
		got = "bool"
	case data[0] == 'n':
		got = "null"
	}
	return &json.UnmarshalTypeError{Value: got, Type: t}
}

// MarshalJSON writes a string when Parts is nil, the parts otherwise.
func (c Content) MarshalJSON() ([]byte, error) {
	if c.Parts != nil {
		return json.Marshal(c.Parts)
	}
	return json.Marshal(c.Text)
}

// Stop is OpenAI's "stop": a string or a list of strings, always held as a list.
type Stop []string

// UnmarshalJSON accepts a string, a list of strings or null.
func (s *Stop) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if bytes.Equal(data, []byte("null")) {
		*s = nil
		return nil
	}
	if len(data) > 0 && data[0] == '"' {
		var one string
		if err := json.Unmarshal(data, &one); err != nil {
			return err
		}
		*s = Stop{one}
		return nil
	}
	var many []string
	if len(data) == 0 || data[0] != '[' {
		return typeError(data, reflect.TypeFor[Stop]())
	}
	if err := json.Unmarshal(data, &many); err != nil {
		return err // a list holding something else: the decoder says where
	}
	*s = many
	return nil
}

// Tool is a function the model may call.
type Tool struct {
	Type     string       `json:"type"` // "function"
	Function ToolFunction `json:"function"`
}

// ToolFunction describes a callable function; Parameters is a JSON Schema.
type ToolFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// ToolCall is a complete call an assistant message made.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"` // "function"
	Function FunctionCall `json:"function"`
}

// FunctionCall is a call's function name and its JSON-encoded arguments.
type FunctionCall struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// ArgumentsObject returns the call's arguments as a JSON object, `{}` when they are empty.
// ok is false when they are not a JSON object, which backends that take arguments as a
// structured value (Anthropic, Gemini) refuse.
func (f FunctionCall) ArgumentsObject() (args json.RawMessage, ok bool) {
	a := bytes.TrimSpace([]byte(f.Arguments))
	if len(a) == 0 {
		return json.RawMessage(`{}`), true
	}
	if a[0] != '{' || !json.Valid(a) {
		return nil, false
	}
	return json.RawMessage(a), true
}
