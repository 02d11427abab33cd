package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/tollgate/tollgate/providers/llm"
)

// POST /v1/responses: OpenAI's Responses API as the Codex CLI and the OpenAI SDKs send it,
// translated to the chat vocabulary so every backend can serve it; a backend that speaks
// Responses itself gets the client's body as sent (llm.Native). The gateway keeps no state:
// previous_response_id, conversation and store: true are refused, naming the field.

// responsesRequest is the part of a Responses request the translation reads. Fields it does
// not model (include, client_metadata, truncation, ...) only reach a
// backend that speaks Responses, in the native body.
type responsesRequest struct {
	Model             string          `json:"model"`
	Instructions      rawValue        `json:"instructions"`
	Input             rawValue        `json:"input"`
	Tools             sentTools       `json:"tools"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	Reasoning         *struct {
		Effort  string `json:"effort"`
		Summary string `json:"summary"`
	} `json:"reasoning"`
	MaxOutputTokens    *int            `json:"max_output_tokens"`
	Temperature        *float64        `json:"temperature"`
	TopP               *float64        `json:"top_p"`
	Stream             bool            `json:"stream"`
	Store              *bool           `json:"store"`
	PreviousResponseID *string         `json:"previous_response_id"`
	Conversation       json.RawMessage `json:"conversation"`
	Background         *bool           `json:"background"`
	Text               *struct {
		Format *struct {
			Type   string          `json:"type"`
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict *bool           `json:"strict"`
		} `json:"format"`
	} `json:"text"`
	User           string   `json:"user"`
	PromptCacheKey string   `json:"prompt_cache_key"` // names the conversation (SPEC §19)
	Metadata       rawValue `json:"metadata"`         // only echoed
}

// sentTools is the request's tools, decoded, and their JSON as sent, which every
// response object echoes.
type sentTools struct {
	list []responsesTool
	raw  rawValue
}

// UnmarshalJSON decodes the list and keeps b; a field of the wrong type is named as it would
// be in a []responsesTool (tools.name), since the decoder puts the path in front.
func (t *sentTools) UnmarshalJSON(b []byte) error {
	t.raw = b
	t.list = nil
	return json.Unmarshal(b, &t.list)
}

// responsesTool is a tool definition: a function, a custom (free-form input) tool, a
// namespace of functions, or one of OpenAI's hosted tools.
type responsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
	Tools       []responsesTool `json:"tools"` // namespace
}

// responsesItem is one input item; the type decides which fields are set. An item with a
// role and no type is a message.
type responsesItem struct {
	Type      string   `json:"type"`
	Role      string   `json:"role"`
	Content   rawValue `json:"content"`
	CallID    string   `json:"call_id"`
	Name      string   `json:"name"`
	Namespace string   `json:"namespace"`
	Arguments string   `json:"arguments"`
	Input     string   `json:"input"`  // custom_tool_call
	Output    rawValue `json:"output"` // function_call_output, custom_tool_call_output
	Summary   []struct {
		Text string `json:"text"`
	} `json:"summary"` // reasoning
}

// responsesPart is one content part of a message or a tool output.
type responsesPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL string `json:"image_url"`
	FileID   string `json:"file_id"`
	Detail   string `json:"detail"`
}

// Hosted tools run inside OpenAI's own service. A chat backend cannot run them, so the
// translation leaves them out; a backend that speaks Responses gets them in the native body.
var hostedTools = map[string]bool{
	"web_search": true, "web_search_preview": true, "file_search": true, "code_interpreter": true,
	"image_generation": true, "computer_use_preview": true, "mcp": true, "local_shell": true,
	"shell": true, "apply_patch": true, "tool_search": true,
}

// customToolSchema is the parameters of a chat function standing in for a custom tool, whose
// input is free text: the model writes it as the function's one string argument.
var customToolSchema = json.RawMessage(`{"type":"object","properties":{"input":{"type":"string","description":"The tool's input, as free text."}},"required":["input"]}`)

// nsSep joins a namespace and a function name into one chat function name (chat names allow
// letters, digits, '_' and '-').
const nsSep = "__"

// parseResponses decodes and validates a Responses body into a chat request carrying the
// body as its native form.
func parseResponses(body []byte, r *http.Request) (*llm.Request, *apiError) {
	p, a := readResponses(body, r)
	if a != nil {
		return nil, a
	}
	return p.req, nil
}

// readResponses is parseResponses with the echo of the request every response object carries.
func readResponses(body []byte, _ *http.Request) (*parsed, *apiError) {
	var in responsesRequest
	trimmed, a := decodeObject(body, &in)
	if a != nil {
		return nil, a
	}
	if a := checkResponses(&in); a != nil {
		return nil, a
	}
	req, a := responsesChat(&in, trimmed)
	if a != nil {
		return nil, a
	}
	return &parsed{req: req, echo: newRespEcho(&in)}, nil
}

// responsesChat translates a checked Responses request to chat, with body as its native form.
func responsesChat(in *responsesRequest, trimmed []byte) (*llm.Request, *apiError) {
	req := &llm.Request{Model: in.Model, Stream: in.Stream, Temperature: in.Temperature, TopP: in.TopP,
		MaxTokens: in.MaxOutputTokens, ParallelToolCalls: in.ParallelToolCalls, User: in.User, Conversation: in.PromptCacheKey,
		Native: &llm.Native{Format: llm.FormatResponses, Body: trimmed}}
	if in.Reasoning != nil {
		req.ReasoningEffort = in.Reasoning.Effort
	}
	if err := instructionsMessage(req, json.RawMessage(in.Instructions)); err != nil {
		return nil, err
	}
	if err := inputItems(req, json.RawMessage(in.Input)); err != nil {
		return nil, err
	}
	if len(req.Messages) == 0 {
		return nil, invalidf("input", "input is empty: send a string or a non-empty array of input items")
	}
	if err := responsesTools(req, in.Tools.list, in.ToolChoice); err != nil {
		return nil, err
	}
	if t := in.Text; t != nil && t.Format != nil && t.Format.Type != "" && t.Format.Type != "text" {
		rf, err := responseFormat(t.Format.Type, t.Format.Name, t.Format.Schema, t.Format.Strict)
		if err != nil {
			return nil, err
		}
		req.ResponseFormat = rf
	}
	return req, nil
}

// checkResponses refuses what a stateless gateway cannot serve and values out of range.
func checkResponses(in *responsesRequest) *apiError {
	switch {
	case in.Model == "":
		return invalidf("model", "missing required field: model (a model id such as \"demo/echo\"; GET /v1/models lists them)")
	case in.PreviousResponseID != nil && *in.PreviousResponseID != "":
		return invalidf("previous_response_id", "previous_response_id is not supported: Tollgate stores no responses; send the whole conversation in input")
	case len(in.Conversation) > 0 && string(in.Conversation) != "null":
		return invalidf("conversation", "conversation is not supported: Tollgate stores no conversations; send the whole conversation in input")
	case in.Store != nil && *in.Store:
		return invalidf("store", "store: true is not supported: Tollgate stores no responses; send store: false or leave it out")
	case in.Background != nil && *in.Background:
		return invalidf("background", "background: true is not supported: Tollgate answers while the client waits")
	case len(in.Input) == 0 || string(in.Input) == "null":
		return invalidf("input", "missing required field: input (a string or an array of input items)")
	}
	return firstError(
		checkTokens("max_output_tokens", in.MaxOutputTokens, 1),
		checkRange("temperature", in.Temperature, 0, 2),
		checkRange("top_p", in.TopP, 0, 1),
	)
}

// instructionsMessage puts the instructions string first, as a system message.
func instructionsMessage(req *llm.Request, raw json.RawMessage) *apiError {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	s, ok := stringValue(raw)
	if !ok {
		return invalidf("instructions", "instructions must be a string")
	}
	if s != "" {
		req.Messages = append(req.Messages, llm.Message{Role: "system", Content: llm.Content{Text: s}})
	}
	return nil
}

// inputItems translates input: a string is one user message; an array holds messages,
// function calls and their outputs, and reasoning items.
func inputItems(req *llm.Request, raw json.RawMessage) *apiError {
	if text, ok := stringValue(raw); ok {
		req.Messages = append(req.Messages, llm.Message{Role: "user", Content: llm.Content{Text: text}})
		return nil
	}
	var items []responsesItem
	if err := json.Unmarshal(raw, &items); err != nil {
		return badItem(raw)
	}
	t := translation{calls: callIDs{}}
	for i := range items {
		if err := t.item(i, &items[i]); err != nil {
			return err
		}
	}
	req.Messages = append(req.Messages, t.flush()...)
	return nil
}

// badItem is the error for an input that does not decode as input items: it decodes them one
// by one to name the one at fault, which only a refused request pays.
func badItem(raw json.RawMessage) *apiError {
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) == nil {
		for i, rawItem := range items {
			var it responsesItem
			if err := json.Unmarshal(rawItem, &it); err != nil {
				return invalidf(fmt.Sprintf("input[%d]", i), "input[%d] is not a valid input item: %v", i, err)
			}
		}
	}
	return invalidf("input", "input must be a string or an array of input items")
}

// translation collects chat messages from input items: consecutive function calls, and the
// text before them, become one assistant message (parallel calls); reasoning items attach to
// the assistant message that follows them.
type translation struct {
	out       []llm.Message
	assistant *llm.Message // the assistant message being built, not yet in out
	reasoning strings.Builder
	calls     callIDs // the call_id of every call so far: an output must answer one
}

func (t *translation) flush() []llm.Message {
	t.endAssistant()
	return t.out
}

func (t *translation) endAssistant() {
	if t.assistant != nil {
		t.out = append(t.out, *t.assistant)
		t.assistant = nil
	}
}

func (t *translation) openAssistant() *llm.Message {
	if t.assistant == nil {
		t.assistant = &llm.Message{Role: "assistant", ReasoningContent: t.reasoning.String()}
		t.reasoning.Reset()
	}
	return t.assistant
}

func (t *translation) item(i int, it *responsesItem) *apiError {
	param := fmt.Sprintf("input[%d]", i)
	typ := it.Type
	if typ == "" && it.Role != "" {
		typ = "message"
	}
	switch typ {
	case "message":
		return t.message(param, it)
	case "function_call", "custom_tool_call":
		if it.CallID == "" || it.Name == "" {
			return invalidf(param, "%s.call_id and %s.name are required for a %s item", param, param, typ)
		}
		args := it.Arguments
		if typ == "custom_tool_call" {
			b, _ := json.Marshal(map[string]string{"input": it.Input})
			args = string(b)
		}
		name := it.Name
		if it.Namespace != "" {
			name = it.Namespace + nsSep + it.Name
		}
		t.calls[it.CallID] = true
		a := t.openAssistant()
		a.ToolCalls = append(a.ToolCalls, llm.ToolCall{ID: it.CallID, Type: "function",
			Function: llm.FunctionCall{Name: name, Arguments: args}})
	case "function_call_output", "custom_tool_call_output":
		if it.CallID == "" {
			return invalidf(param+".call_id", "%s.call_id is required for a %s item", param, typ)
		}
		if !t.calls[it.CallID] {
			return invalidf(param+".call_id", "%s.call_id %q names no function_call or custom_tool_call item before it", param, it.CallID)
		}
		text, err := outputText(param+".output", json.RawMessage(it.Output))
		if err != nil {
			return err
		}
		t.endAssistant()
		t.out = append(t.out, llm.Message{Role: "tool", ToolCallID: it.CallID, Content: llm.Content{Text: text}})
	case "reasoning":
		for _, s := range it.Summary {
			if t.reasoning.Len() > 0 && s.Text != "" {
				t.reasoning.WriteString("\n\n")
			}
			t.reasoning.WriteString(s.Text)
		}
	case "item_reference":
		return invalidf(param+".type", "%s: item_reference is not supported: Tollgate stores no items; send the item itself", param)
	default:
		return invalidf(param+".type", "%s.type %q is not supported (message, function_call, function_call_output, custom_tool_call, custom_tool_call_output, reasoning)", param, it.Type)
	}
	return nil
}

// message translates a message item. An assistant message joins the assistant turn being
// built, so its text and the calls after it stay one chat message.
func (t *translation) message(param string, it *responsesItem) *apiError {
	role := it.Role
	switch role {
	case "user", "system", "developer", "assistant":
	case "":
		return invalidf(param+".role", "%s.role is missing", param)
	default:
		return invalidf(param+".role", "%s.role %q is not one of user, system, developer, assistant", param, role)
	}
	content, err := messageContent(param+".content", json.RawMessage(it.Content))
	if err != nil {
		return err
	}
	if role == "assistant" {
		a := t.openAssistant()
		if len(a.ToolCalls) > 0 { // text after calls starts a new turn
			t.endAssistant()
			a = t.openAssistant()
		}
		a.Content = joinContent(a.Content, content)
		return nil
	}
	if role == "developer" {
		// Codex sends its instructions as developer messages. OpenAI reads system as
		// developer; the compatible backends (Ollama, DeepSeek, ...) know only system.
		role = "system"
	}
	t.endAssistant()
	t.out = append(t.out, llm.Message{Role: role, Content: content})
	return nil
}

// joinContent appends b's parts to a's.
func joinContent(a, b llm.Content) llm.Content {
	if a.Parts == nil && a.Text == "" {
		return b
	}
	return llm.Content{Parts: append(contentParts(a), contentParts(b)...)}
}

func contentParts(c llm.Content) []llm.Part {
	if c.Parts != nil {
		return c.Parts
	}
	if c.Text == "" {
		return nil
	}
	return []llm.Part{{Type: "text", Text: c.Text}}
}

// messageContent translates a message's content: a string, or input_text / output_text /
// refusal / input_image parts.
func messageContent(param string, raw json.RawMessage) (llm.Content, *apiError) {
	if s, ok := stringValue(raw); ok {
		return llm.Content{Text: s}, nil
	}
	var parts []responsesPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return llm.Content{}, invalidf(param, "%s must be a string or an array of content parts", param)
	}
	out := []llm.Part{}
	for j, p := range parts {
		pp := fmt.Sprintf("%s[%d]", param, j)
		switch p.Type {
		case "input_text", "output_text", "text":
			out = append(out, llm.Part{Type: "text", Text: p.Text})
		case "refusal":
			out = append(out, llm.Part{Type: "text", Text: p.Refusal})
		case "input_image":
			if p.ImageURL == "" {
				return llm.Content{}, invalidf(pp+".image_url", "%s: an input_image needs image_url (a URL or a data: URI); file_id needs OpenAI's file store", pp)
			}
			if a := checkImageURL(pp+".image_url", p.ImageURL); a != nil {
				return llm.Content{}, a
			}
			out = append(out, llm.Part{Type: "image_url", ImageURL: &llm.ImageURL{URL: p.ImageURL, Detail: p.Detail}})
		default:
			return llm.Content{}, invalidf(pp+".type", "%s.type %q is not supported (input_text, output_text, refusal, input_image)", pp, p.Type)
		}
	}
	if len(out) == 1 && out[0].Type == "text" {
		return llm.Content{Text: out[0].Text}, nil
	}
	return llm.Content{Parts: out}, nil
}

// outputText reads a tool output: a string, or content parts whose text is joined.
func outputText(param string, raw json.RawMessage) (string, *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if s, ok := stringValue(raw); ok {
		return s, nil
	}
	c, err := messageContent(param, raw)
	if err != nil {
		return "", err
	}
	for _, p := range c.Parts {
		if p.Type != "text" {
			return "", invalidf(param, "%s: a tool output may hold text only", param)
		}
	}
	return c.PlainText(), nil
}

// responsesTools translates function, custom and namespace tools and tool_choice; hosted
// tools are left out (see hostedTools).
func responsesTools(req *llm.Request, tools []responsesTool, choice json.RawMessage) *apiError {
	for i, t := range tools {
		param := fmt.Sprintf("tools[%d]", i)
		switch {
		case t.Type == "function" || t.Type == "custom":
			tool, err := chatTool(param, "", t)
			if err != nil {
				return err
			}
			req.Tools = append(req.Tools, tool)
		case t.Type == "namespace":
			for j, f := range t.Tools {
				tool, err := chatTool(fmt.Sprintf("%s.tools[%d]", param, j), t.Name, f)
				if err != nil {
					return err
				}
				req.Tools = append(req.Tools, tool)
			}
		case hostedTools[t.Type]:
		default:
			return invalidf(param+".type", "%s.type %q is not supported (function, custom, namespace, or a hosted tool)", param, t.Type)
		}
	}
	tc, err := responsesToolChoice(choice)
	if err != nil {
		return err
	}
	req.ToolChoice = tc
	return nil
}

// chatTool is the chat function for a function or custom tool, in namespace ns ("" for none).
func chatTool(param, ns string, t responsesTool) (llm.Tool, *apiError) {
	if t.Name == "" {
		return llm.Tool{}, invalidf(param+".name", "%s.name is required", param)
	}
	name := t.Name
	if ns != "" {
		name = ns + nsSep + t.Name
	}
	f := llm.ToolFunction{Name: name, Description: t.Description, Parameters: t.Parameters, Strict: t.Strict}
	switch t.Type {
	case "function":
	case "custom":
		f.Parameters, f.Strict = customToolSchema, nil
	default:
		return llm.Tool{}, invalidf(param+".type", "%s.type %q is not supported inside a namespace", param, t.Type)
	}
	return llm.Tool{Type: "function", Function: f}, nil
}

// responsesToolChoice translates tool_choice: the same words as chat, or a named function.
func responsesToolChoice(raw json.RawMessage) (json.RawMessage, *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if mode, ok := stringValue(raw); ok {
		switch mode {
		case "auto", "none", "required":
			return raw, nil
		}
		return nil, invalidf("tool_choice", "tool_choice %q is not one of auto, none, required", mode)
	}
	var named struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if json.Unmarshal(raw, &named) != nil {
		return nil, invalidf("tool_choice", "tool_choice must be a string or an object")
	}
	switch named.Type {
	case "function", "custom":
		if named.Name == "" {
			return nil, invalidf("tool_choice.name", "tool_choice.name is required")
		}
		b, _ := json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": named.Name}})
		return b, nil
	case "allowed_tools":
		return json.RawMessage(`"auto"`), nil
	}
	return nil, invalidf("tool_choice.type", "tool_choice.type %q is not supported (function, custom, allowed_tools)", named.Type)
}

// responseFormat translates text.format into chat's response_format.
func responseFormat(typ, name string, schema json.RawMessage, strict *bool) (json.RawMessage, *apiError) {
	switch typ {
	case "json_object":
		return json.RawMessage(`{"type":"json_object"}`), nil
	case "json_schema":
		js := map[string]any{"name": name, "schema": schema}
		if strict != nil {
			js["strict"] = *strict
		}
		b, err := json.Marshal(map[string]any{"type": "json_schema", "json_schema": js})
		if err != nil {
			return nil, invalidf("text.format.schema", "text.format.schema is not valid JSON")
		}
		return b, nil
	}
	return nil, invalidf("text.format.type", "text.format.type %q is not one of text, json_object, json_schema", typ)
}
