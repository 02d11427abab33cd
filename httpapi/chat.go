package httpapi

import (
	"fmt"
	"net/http"

	"github.com/tollgate/tollgate/providers/llm"
)

// chatRoute is the chat route's pattern, for logs, metrics and spans.
const chatRoute = "/v1/chat/completions"

// chatAPI is POST /v1/chat/completions (chatAnswer).
var chatAPI = &ingress{
	route:  chatRoute,
	native: llm.FormatChat,
	parse:  func(body []byte, _ *http.Request) (*parsed, *apiError) { return only(parseChat(body)) },
	fail:   failOpenAI,
	answer: newChatAnswer,
}

// only is a parsed request of a format whose answer needs nothing beyond the chat request.
func only(req *llm.Request, a *apiError) (*parsed, *apiError) {
	if a != nil {
		return nil, a
	}
	return &parsed{req: req}, nil
}

// readRequest reads what every ingress format shares: the X-Gateway-Priority header and the
// body, bounded by max_body_bytes and body_timeout (readBody).
func (s *Server) readRequest(w http.ResponseWriter, r *http.Request) (llm.Priority, []byte, *apiError) {
	prio, err := llm.ParsePriority(r.Header.Get("X-Gateway-Priority"))
	if err != nil {
		a := invalid("X-Gateway-Priority", "header X-Gateway-Priority: "+err.Error())
		return 0, nil, &a
	}
	body, a := s.readBody(w, r)
	if a != nil {
		return 0, nil, a
	}
	return prio, body, nil
}

// chatDecoded is a chat body as decoded: the request, and prompt_cache_key, which names
// the conversation (SPEC §19) and reaches an OpenAI-compatible backend in the body as sent.
type chatDecoded struct {
	*llm.Request
	PromptCacheKey string `json:"prompt_cache_key"`
}

// parseChat decodes a chat request body and checks the fields the gateway relies on.
func parseChat(body []byte) (*llm.Request, *apiError) {
	req := &llm.Request{}
	in := chatDecoded{Request: req}
	trimmed, a := decodeObject(body, &in)
	if a != nil {
		return nil, a
	}
	req.Body, req.Conversation = trimmed, in.PromptCacheKey
	if a := checkChat(req); a != nil {
		return nil, a
	}
	return req, nil
}

// checkChat checks the fields of a decoded chat request that the gateway relies on. It is
// apart from parseChat so that its locals are not in the frame above the JSON decoder, on
// the HTTP server's connection goroutine (docs/benchmarks.md).
func checkChat(req *llm.Request) *apiError {
	switch {
	case req.Model == "":
		a := invalid("model", "missing required field: model (a model id such as \"demo/echo\"; GET /v1/models lists them)")
		return &a
	case len(req.Messages) == 0:
		a := invalid("messages", "missing required field: messages (a non-empty array of chat messages)")
		return &a
	case req.StreamOptions != nil && !req.Stream:
		a := invalid("stream_options", "stream_options is only allowed when stream is true")
		return &a
	}
	if a := checkChatRanges(req); a != nil {
		return a
	}
	calls := callIDs{}
	for i := range req.Messages {
		if a := checkChatMessage(i, &req.Messages[i], calls); a != nil {
			return a
		}
	}
	return nil
}

// checkChatMessage checks message i: its role, that a tool message answers a call of an
// earlier assistant message (calls, which an assistant message adds its calls to), and its
// images' data: URIs.
func checkChatMessage(i int, m *llm.Message, calls callIDs) *apiError {
	switch m.Role {
	case "system", "developer", "user", "assistant", "tool":
	case "":
		return invalidf(fmt.Sprintf("messages[%d].role", i), "messages[%d].role is missing", i)
	default:
		return invalidf(fmt.Sprintf("messages[%d].role", i),
			"messages[%d].role %q is not one of system, developer, user, assistant, tool", i, m.Role)
	}
	for _, tc := range m.ToolCalls {
		calls[tc.ID] = true
	}
	if m.Role == "tool" {
		param := fmt.Sprintf("messages[%d].tool_call_id", i)
		switch {
		case m.ToolCallID == "":
			return invalidf(param, "%s is required in a tool message (the id of the call it answers)", param)
		case !calls[m.ToolCallID]:
			return invalidf(param, "%s %q names no tool call of an earlier assistant message", param, m.ToolCallID)
		}
	}
	for j, p := range m.Content.Parts {
		if p.ImageURL != nil {
			if a := checkImageURL(fmt.Sprintf("messages[%d].content[%d].image_url.url", i, j), p.ImageURL.URL); a != nil {
				return a
			}
		}
	}
	return nil
}
