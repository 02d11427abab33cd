package gemini

import (
	"encoding/json"
	"fmt"
	"mime"
	"path"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/providers/llm"
)

// generateRequest is the body of generateContent and streamGenerateContent.
type generateRequest struct {
	Contents          []content         `json:"contents"`
	SystemInstruction *content          `json:"systemInstruction,omitempty"`
	Tools             []toolSet         `json:"tools,omitempty"`
	ToolConfig        *toolConfig       `json:"toolConfig,omitempty"`
	GenerationConfig  *generationConfig `json:"generationConfig,omitempty"`
}

type content struct {
	Role  string `json:"role,omitempty"` // "user" or "model"; none for systemInstruction
	Parts []part `json:"parts"`
}

// part is any content part; exactly one of its payload fields is set.
type part struct {
	Text             string            `json:"text,omitempty"`
	Thought          bool              `json:"thought,omitempty"`
	InlineData       *blob             `json:"inlineData,omitempty"`
	FileData         *fileData         `json:"fileData,omitempty"`
	FunctionCall     *functionCall     `json:"functionCall,omitempty"`
	FunctionResponse *functionResponse `json:"functionResponse,omitempty"`
	ThoughtSignature string            `json:"thoughtSignature,omitempty"`
}

type blob struct {
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
}

type fileData struct {
	MimeType string `json:"mimeType,omitempty"`
	FileURI  string `json:"fileUri"`
}

type functionCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

type functionResponse struct {
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`
}

type toolSet struct {
	FunctionDeclarations []functionDeclaration `json:"functionDeclarations"`
}

type functionDeclaration struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

type toolConfig struct {
	FunctionCallingConfig functionCallingConfig `json:"functionCallingConfig"`
}

type functionCallingConfig struct {
	Mode                 string   `json:"mode"` // AUTO, ANY, NONE
	AllowedFunctionNames []string `json:"allowedFunctionNames,omitempty"`
}

type generationConfig struct {
	Temperature     *float64        `json:"temperature,omitempty"`
	TopP            *float64        `json:"topP,omitempty"`
	MaxOutputTokens int             `json:"maxOutputTokens,omitempty"`
	StopSequences   []string        `json:"stopSequences,omitempty"`
	ThinkingConfig  *thinkingConfig `json:"thinkingConfig,omitempty"`
}

type thinkingConfig struct {
	ThinkingBudget  int  `json:"thinkingBudget"`
	IncludeThoughts bool `json:"includeThoughts,omitempty"`
}

// thinkingBudgets maps OpenAI's reasoning_effort onto thinkingBudget, with the values
// Google's own OpenAI compatibility layer uses for low/medium/high. "none" turns thinking off
// (budget 0) where the model allows it.
var thinkingBudgets = map[string]int{
	"none":    0,
	"minimal": 512,
	"low":     1024,
	"medium":  8192,
	"high":    24576,
	"xhigh":   32768,
	"max":     32768,
}

// skipSignature is Google's documented stand-in for the thoughtSignature that Gemini 3
// requires on every replayed functionCall part. OpenAI clients never see the real one, so a
// conversation with tool calls could not continue without it.
const skipSignature = "skip_thought_signature_validator"

// buildRequest translates an OpenAI chat request. Problems with the client's request come
// back as *llm.Error of KindInvalidRequest naming the field.
func buildRequest(req *llm.Request) (*generateRequest, error) {
	out := &generateRequest{}
	if err := translateMessages(out, req.Messages, needsSignature(req.Model)); err != nil {
		return nil, err
	}
	if err := translateTools(out, req); err != nil {
		return nil, err
	}
	gc := &generationConfig{Temperature: req.Temperature, TopP: req.TopP,
		MaxOutputTokens: req.OutputLimit(), StopSequences: req.Stop}
	if e := req.ReasoningEffort; e != "" {
		budget, ok := thinkingBudgets[e]
		if !ok {
			return nil, invalid("reasoning_effort", "reasoning_effort %q is not supported", e)
		}
		// maxOutputTokens covers thoughts too: keep half of a smaller limit for the answer.
		if limit := gc.MaxOutputTokens; limit > 0 && budget >= limit {
			budget = limit / 2
		}
		gc.ThinkingConfig = &thinkingConfig{ThinkingBudget: budget, IncludeThoughts: budget > 0}
	}
	if gc.Temperature != nil || gc.TopP != nil || gc.MaxOutputTokens > 0 || len(gc.StopSequences) > 0 ||
		gc.ThinkingConfig != nil {
		out.GenerationConfig = gc
	}
	return out, nil
}

// needsSignature reports whether model is Gemini 3 or later, which validates thought
// signatures on replayed function calls.
func needsSignature(model string) bool {
	rest, ok := strings.CutPrefix(path.Base(model), "gemini-")
	if !ok {
		return false
	}
	end := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
	if end < 0 {
		end = len(rest)
	}
	major, err := strconv.Atoi(rest[:end])
	return err == nil && major >= 3
}

// translateMessages moves system and developer messages into systemInstruction and the rest
// into user/model contents, merging consecutive contents of the same role.
func translateMessages(out *generateRequest, msgs []llm.Message, signature bool) error {
	var system []part
	for i, m := range msgs {
		var role string
		var parts []part
		var err error
		switch m.Role {
		case "system", "developer":
			if t := m.Content.PlainText(); t != "" {
				system = append(system, part{Text: t})
			}
			continue
		case "user":
			role = "user"
			parts, err = contentParts(m.Content, fmt.Sprintf("messages[%d].content", i))
		case "assistant":
			role = "model"
			parts, err = modelParts(m, i, signature)
		case "tool":
			role = "user"
			parts, err = functionResponseParts(msgs, i)
		default:
			return invalid(fmt.Sprintf("messages[%d].role", i), "role %q is not supported", m.Role)
		}
		if err != nil {
			return err
		}
		if len(parts) == 0 {
			continue // Gemini rejects a content without parts
		}
		if n := len(out.Contents); n > 0 && out.Contents[n-1].Role == role {
			out.Contents[n-1].Parts = append(out.Contents[n-1].Parts, parts...)
			continue
		}
		out.Contents = append(out.Contents, content{Role: role, Parts: parts})
	}
	if len(system) > 0 {
		out.SystemInstruction = &content{Parts: system}
	}
	if out.Contents == nil {
		out.Contents = []content{}
	}
	return nil
}

// contentParts turns OpenAI content (a string or parts) into text and image parts.
func contentParts(c llm.Content, param string) ([]part, error) {
	if c.Parts == nil {
		if c.Text == "" {
			return nil, nil
		}
		return []part{{Text: c.Text}}, nil
	}
	var parts []part
	for j, p := range c.Parts {
		switch p.Type {
		case "text":
			if p.Text != "" {
				parts = append(parts, part{Text: p.Text})
			}
		case "image_url":
			if p.ImageURL == nil || p.ImageURL.URL == "" {
				return nil, invalid(fmt.Sprintf("%s[%d].image_url", param, j), "image_url is missing")
			}
			parts = append(parts, imagePart(p.ImageURL.URL))
		default:
			return nil, invalid(fmt.Sprintf("%s[%d].type", param, j), "content part type %q is not supported", p.Type)
		}
	}
	return parts, nil
}

// imagePart inlines a data: URI and passes any other URL (a Files API or gs:// URI) by
// reference, with the media type its extension suggests.
func imagePart(u string) part {
	if mediaType, data, ok := parseDataURI(u); ok {
		return part{InlineData: &blob{MimeType: mediaType, Data: data}}
	}
	mt, _, _ := strings.Cut(mime.TypeByExtension(path.Ext(u)), ";")
	return part{FileData: &fileData{MimeType: mt, FileURI: u}}
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
	return mediaType, data, found && mediaType != ""
}

// modelParts turns an assistant turn into text and functionCall parts. Earlier reasoning is
// dropped: Gemini does not take thoughts back.
func modelParts(m llm.Message, i int, signature bool) ([]part, error) {
	parts, err := contentParts(m.Content, fmt.Sprintf("messages[%d].content", i))
	if err != nil {
		return nil, err
	}
	for j, tc := range m.ToolCalls {
		args, ok := tc.Function.ArgumentsObject()
		if !ok {
			return nil, invalid(fmt.Sprintf("messages[%d].tool_calls[%d].function.arguments", i, j),
				"arguments must be a JSON object")
		}
		p := part{FunctionCall: &functionCall{Name: tc.Function.Name, Args: args}}
		if signature {
			p.ThoughtSignature = skipSignature
		}
		parts = append(parts, p)
	}
	return parts, nil
}

// functionResponseParts turns the tool message msgs[i] into a functionResponse part. Gemini
// matches responses to calls by function name, which OpenAI only gives on the call: it is
// taken from the latest earlier assistant tool call with the same id.
func functionResponseParts(msgs []llm.Message, i int) ([]part, error) {
	m := msgs[i]
	name := m.Name
	for k := i - 1; k >= 0 && name == ""; k-- {
		for _, tc := range msgs[k].ToolCalls {
			if tc.ID == m.ToolCallID {
				name = tc.Function.Name
				break
			}
		}
	}
	if name == "" {
		return nil, invalid(fmt.Sprintf("messages[%d].tool_call_id", i),
			"tool_call_id %q matches no earlier assistant tool call", m.ToolCallID)
	}
	text := m.Content.PlainText()
	// response must be a JSON object: a tool that answered with one is passed as is,
	// anything else is wrapped.
	resp := json.RawMessage(strings.TrimSpace(text))
	if len(resp) == 0 || resp[0] != '{' || !json.Valid(resp) {
		resp, _ = json.Marshal(map[string]string{"result": text})
	}
	return []part{{FunctionResponse: &functionResponse{Name: name, Response: resp}}}, nil
}

// translateTools maps function tools and tool_choice.
func translateTools(out *generateRequest, req *llm.Request) error {
	var decls []functionDeclaration
	for i, t := range req.Tools {
		if t.Type != "function" && t.Type != "" {
			return invalid(fmt.Sprintf("tools[%d].type", i), "tool type %q is not supported", t.Type)
		}
		params := t.Function.Parameters
		if string(params) == "null" {
			params = nil
		}
		decls = append(decls, functionDeclaration{Name: t.Function.Name, Description: t.Function.Description, Parameters: params})
	}
	if decls != nil {
		out.Tools = []toolSet{{FunctionDeclarations: decls}}
	}
	if len(req.ToolChoice) == 0 || string(req.ToolChoice) == "null" {
		return nil
	}
	var mode string
	if json.Unmarshal(req.ToolChoice, &mode) == nil {
		modes := map[string]string{"auto": "AUTO", "none": "NONE", "required": "ANY"}
		if modes[mode] == "" {
			return invalid("tool_choice", "tool_choice %q is not supported", mode)
		}
		out.ToolConfig = &toolConfig{FunctionCallingConfig: functionCallingConfig{Mode: modes[mode]}}
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
	out.ToolConfig = &toolConfig{FunctionCallingConfig: functionCallingConfig{Mode: "ANY",
		AllowedFunctionNames: []string{named.Function.Name}}}
	return nil
}

func invalid(param, format string, args ...any) *llm.Error {
	return &llm.Error{Kind: llm.KindInvalidRequest, Param: param, Message: fmt.Sprintf(format, args...)}
}
