package fakellm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/tollgate/tollgate/providers/fake"
)

// api is the wire format a request came in.
type api int

const (
	apiChat      api = iota // OpenAI Chat Completions
	apiResponses            // OpenAI Responses
	apiAnthropic            // Anthropic Messages
	apiGemini               // Gemini generateContent
)

// maxBody bounds a request body; Claude Code's are large (system prompt, tools) but far below.
const maxBody = 32 << 20

// call is one generation request, decoded just enough to answer it.
type call struct {
	api          api
	id           string
	created      int64
	model        string
	stream       bool
	includeUsage bool // OpenAI stream_options.include_usage
	geminiSSE    bool // streamGenerateContent?alt=sse (else a streamed JSON array)
	thinking     bool // the client asked to see reasoning (thinking, includeThoughts, reasoning.summary)
	maxTokens    int  // the client's output cap; 0 = none
	prompt       int  // prompt tokens, counted as words of the prompt's text
	modes        Modes

	reasoning []string // reasoning pieces to stream, maybe none
	pieces    []string // content pieces to stream
	truncated bool     // pieces were cut to maxTokens

	tools      []string  // the names of the tools the request offers
	toolResult string    // the text of the tool results in the conversation
	sawResult  bool      // the conversation holds a tool result
	tool       *toolPlan // tool-call mode: the answer is this call (tool.go)

	embed      *embedCall      // an embeddings call (surface.go)
	completion *completionCall // a legacy completions call (surface.go)
}

// addResult records one tool result of the conversation.
func (c *call) addResult(raw json.RawMessage) {
	c.sawResult = true
	c.toolResult += outputText(raw)
}

// completionTokens counts one token per piece streamed, and one for a tool call.
func (c *call) completionTokens() int {
	n := len(c.reasoning) + len(c.pieces)
	if c.tool != nil {
		n++
	}
	return n
}

// readBody reads and decodes a JSON request body into v.
func readBody(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		return fmt.Errorf("read request body: %w", err)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("decode request body: %w", err)
	}
	return nil
}

type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role             string          `json:"role"`
		Content          json.RawMessage `json:"content"`
		ReasoningContent string          `json:"reasoning_content"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
	Stream        bool `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           *int   `json:"max_tokens"`
	MaxCompletionTokens *int   `json:"max_completion_tokens"`
	ReasoningEffort     string `json:"reasoning_effort"`
}

func parseChat(w http.ResponseWriter, r *http.Request, c *call) error {
	var req chatRequest
	if err := readBody(w, r, &req); err != nil {
		return err
	}
	c.model, c.stream = req.Model, req.Stream
	c.includeUsage = req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	c.thinking = req.ReasoningEffort != "" && req.ReasoningEffort != "none" // as DeepSeek's thinking mode
	switch {
	case req.MaxCompletionTokens != nil:
		c.maxTokens = *req.MaxCompletionTokens
	case req.MaxTokens != nil:
		c.maxTokens = *req.MaxTokens
	}
	for _, m := range req.Messages {
		c.prompt += countWords(m.Content) + countFields(m.ReasoningContent)
		if m.Role == "tool" {
			c.addResult(m.Content)
		}
	}
	for _, t := range req.Tools {
		c.tools = append(c.tools, t.Function.Name)
	}
	return nil
}

type responsesRequest struct {
	Model           string          `json:"model"`
	Instructions    string          `json:"instructions"`
	Input           json.RawMessage `json:"input"`
	Stream          bool            `json:"stream"`
	MaxOutputTokens *int            `json:"max_output_tokens"`
	Reasoning       *struct {
		Summary string `json:"summary"`
	} `json:"reasoning"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

func parseResponses(w http.ResponseWriter, r *http.Request, c *call) error {
	var req responsesRequest
	if err := readBody(w, r, &req); err != nil {
		return err
	}
	c.model, c.stream = req.Model, req.Stream
	if req.MaxOutputTokens != nil {
		c.maxTokens = *req.MaxOutputTokens
	}
	c.thinking = req.Reasoning != nil && req.Reasoning.Summary != "" && req.Reasoning.Summary != "none"
	c.prompt = countFields(req.Instructions) + countWords(req.Input)
	var items []struct {
		Type   string          `json:"type"`
		Output json.RawMessage `json:"output"`
	}
	_ = json.Unmarshal(req.Input, &items) // a string input holds no tool results
	for _, it := range items {
		if it.Type == "function_call_output" || it.Type == "custom_tool_call_output" {
			c.addResult(it.Output)
		}
	}
	for _, t := range req.Tools {
		c.tools = append(c.tools, t.Name)
	}
	return nil
}

type anthropicRequest struct {
	Model     string `json:"model"`
	MaxTokens int    `json:"max_tokens"`
	Messages  []struct {
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	System   json.RawMessage `json:"system"`
	Stream   bool            `json:"stream"`
	Thinking *struct {
		Type string `json:"type"`
	} `json:"thinking"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

func parseAnthropic(w http.ResponseWriter, r *http.Request, c *call) error {
	var req anthropicRequest
	if err := readBody(w, r, &req); err != nil {
		return err
	}
	c.model, c.stream, c.maxTokens = req.Model, req.Stream, req.MaxTokens
	c.thinking = req.Thinking != nil && req.Thinking.Type != "" && req.Thinking.Type != "disabled"
	c.prompt = countWords(req.System)
	for _, m := range req.Messages {
		c.prompt += countWords(m.Content)
		var blocks []struct {
			Type    string          `json:"type"`
			Content json.RawMessage `json:"content"`
		}
		_ = json.Unmarshal(m.Content, &blocks) // a string content holds no tool results
		for _, b := range blocks {
			if b.Type == "tool_result" {
				c.addResult(b.Content)
			}
		}
	}
	for _, t := range req.Tools {
		c.tools = append(c.tools, t.Name)
	}
	return nil
}

type geminiPart struct {
	Text string `json:"text"`
}

type geminiRequest struct {
	Contents []struct {
		Parts []geminiPart `json:"parts"`
	} `json:"contents"`
	SystemInstruction *struct {
		Parts []geminiPart `json:"parts"`
	} `json:"systemInstruction"`
	GenerationConfig *struct {
		MaxOutputTokens int `json:"maxOutputTokens"`
		ThinkingConfig  *struct {
			IncludeThoughts bool `json:"includeThoughts"`
		} `json:"thinkingConfig"`
	} `json:"generationConfig"`
}

// parseGemini decodes the body; the model and the method come from the path.
func parseGemini(w http.ResponseWriter, r *http.Request, c *call) error {
	if c.embed != nil {
		return parseGeminiEmbed(w, r, c)
	}
	var req geminiRequest
	if err := readBody(w, r, &req); err != nil {
		return err
	}
	if g := req.GenerationConfig; g != nil {
		c.maxTokens = g.MaxOutputTokens
		c.thinking = g.ThinkingConfig != nil && g.ThinkingConfig.IncludeThoughts
	}
	if si := req.SystemInstruction; si != nil {
		for _, p := range si.Parts {
			c.prompt += countFields(p.Text)
		}
	}
	for _, content := range req.Contents {
		for _, p := range content.Parts {
			c.prompt += countFields(p.Text)
		}
	}
	return nil
}

// countWords counts the words of a message content in any of the APIs' shapes: a string, or
// a list of parts whose "text" (and nested "content", as in tool results) hold the words.
func countWords(raw json.RawMessage) int {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return 0
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return countFields(s)
		}
	case '[':
		var parts []struct {
			Text    string          `json:"text"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(raw, &parts) != nil {
			return 0
		}
		n := 0
		for _, p := range parts {
			n += countFields(p.Text) + countWords(p.Content)
		}
		return n
	}
	return 0
}

// countFields is len(strings.Fields(s)) without building the slice.
func countFields(s string) int {
	n, in := 0, false
	for _, r := range s {
		space := unicode.IsSpace(r)
		if !space && !in {
			n++
		}
		in = !space
	}
	return n
}

// tokenize splits s as the in-process fake does, so both fakes count tokens alike.
var tokenize = fake.Tokenize

// group joins toks into at most n pieces of near-equal token counts, in order.
func group(toks []string, n int) []string {
	if n <= 0 || len(toks) <= n {
		return toks
	}
	pieces := make([]string, n)
	for i := range n {
		lo, hi := i*len(toks)/n, (i+1)*len(toks)/n
		pieces[i] = strings.Join(toks[lo:hi], "")
	}
	return pieces
}

// cycle returns exactly n pieces taken round-robin from base; a piece that starts a new round
// gets a separating space unless it starts with one or is not ASCII text.
func cycle(base []string, n int) []string {
	pieces := make([]string, n)
	for i := range n {
		p := base[i%len(base)]
		if i >= len(base) && i%len(base) == 0 {
			if r, _ := utf8.DecodeRuneInString(p); r < utf8.RuneSelf && !unicode.IsSpace(r) {
				p = " " + p
			}
		}
		pieces[i] = p
	}
	return pieces
}
