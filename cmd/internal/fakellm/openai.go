package fakellm

import (
	"net/http"
	"strconv"
	"strings"
)

// chatStream writes OpenAI chat.completion.chunk events. The bytes shared by every chunk
// (id, created, model) are encoded once, in prefix.
type chatStream struct {
	c      *call
	buf    []byte
	prefix []byte // `data: {"id":…,"model":…,"choices":[`
	suffix string // closes a chunk, with "usage":null when the client asked for usage
}

func newChatStream(c *call) *chatStream {
	p := append([]byte(nil), `data: {"id":"chatcmpl-fakellm-`...)
	p = append(p, c.id...)
	p = append(p, `","object":"chat.completion.chunk","created":`...)
	p = strconv.AppendInt(p, c.created, 10)
	p = append(p, `,"model":`...)
	p = appendString(p, c.model)
	p = append(p, `,"choices":[`...)
	s := &chatStream{c: c, prefix: p, suffix: "}\n\n", buf: make([]byte, 0, len(p)+256)}
	if c.includeUsage {
		s.suffix = `,"usage":null}` + "\n\n"
	}
	return s
}

// delta writes a chunk whose delta holds one field (none when key is "").
func (s *chatStream) delta(e *emitter, key, text string, finish string) error {
	b := append(s.buf[:0], s.prefix...)
	b = append(b, `{"index":0,"delta":{`...)
	if key != "" {
		b = append(b, key...)
		b = appendString(b, text)
	}
	b = append(b, `},"finish_reason":`...)
	if finish == "" {
		b = append(b, "null"...)
	} else {
		b = appendString(b, finish)
	}
	b = append(b, `}]`...)
	b = append(b, s.suffix...)
	s.buf = b
	return e.send(b)
}

func (s *chatStream) start(e *emitter) error {
	return s.delta(e, `"role":"assistant","content":`, "", "")
}

func (s *chatStream) reasoning(e *emitter, text string) error {
	if s.c.modes.Has(ModeOllamaReasoning) {
		return s.delta(e, `"reasoning":`, text, "")
	}
	return s.delta(e, `"reasoning_content":`, text, "")
}

func (s *chatStream) content(e *emitter, text string) error {
	return s.delta(e, `"content":`, text, "")
}

func (s *chatStream) finish(e *emitter) error {
	if err := s.delta(e, "", "", chatFinish(s.c)); err != nil {
		return err
	}
	if s.c.includeUsage {
		b := append(s.buf[:0], s.prefix...)
		b = append(b, `],"usage":`...)
		b = appendChatUsage(b, s.c)
		b = append(b, "}\n\n"...)
		s.buf = b
		if err := e.send(b); err != nil {
			return err
		}
	}
	return e.send([]byte("data: [DONE]\n\n"))
}

// fail sends the error object the OpenAI SDKs raise on, and no [DONE].
func (s *chatStream) fail(e *emitter) error {
	b := append(s.buf[:0], "data: "...)
	b = append(b, errorBody(apiChat, internalError(apiChat))...)
	b = append(b, "\n\n"...)
	s.buf = b
	return e.send(b)
}

func chatFinish(c *call) string {
	switch {
	case c.tool != nil:
		return "tool_calls"
	case c.truncated:
		return "length"
	}
	return "stop"
}

// chatWhole is a non-streaming chat.completion.
func chatWhole(c *call) []byte {
	b := append([]byte(nil), `{"id":"chatcmpl-fakellm-`...)
	b = append(b, c.id...)
	b = append(b, `","object":"chat.completion","created":`...)
	b = strconv.AppendInt(b, c.created, 10)
	b = append(b, `,"model":`...)
	b = appendString(b, c.model)
	b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant","content":`...)
	b = appendString(b, strings.Join(c.pieces, ""))
	if len(c.reasoning) > 0 {
		if c.modes.Has(ModeOllamaReasoning) {
			b = append(b, `,"reasoning":`...)
		} else {
			b = append(b, `,"reasoning_content":`...)
		}
		b = appendString(b, strings.Join(c.reasoning, ""))
	}
	b = append(b, `,"refusal":null},"finish_reason":`...)
	b = appendString(b, chatFinish(c))
	b = append(b, `,"logprobs":null}],"usage":`...)
	b = appendChatUsage(b, c)
	return append(b, '}')
}

// modelsCreated is the fixed "created" of listed models (2026-01-01).
const modelsCreated = 1767225600

// listModels answers GET /v1/models in OpenAI's shape, or Anthropic's when the client sent
// anthropic-version (Claude Code, the Anthropic SDKs).
func (s *Server) listModels(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Anthropic-Version") != "" {
		type model struct {
			Type        string `json:"type"`
			ID          string `json:"id"`
			DisplayName string `json:"display_name"`
			CreatedAt   string `json:"created_at"`
		}
		list := struct {
			Data    []model `json:"data"`
			HasMore bool    `json:"has_more"`
			FirstID string  `json:"first_id"`
			LastID  string  `json:"last_id"`
		}{FirstID: s.opts.Models[0], LastID: s.opts.Models[len(s.opts.Models)-1]}
		for _, id := range s.opts.Models {
			list.Data = append(list.Data, model{"model", id, id, "2026-01-01T00:00:00Z"})
		}
		writeJSON(w, http.StatusOK, list)
		return
	}
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list"}
	for _, id := range s.opts.Models {
		list.Data = append(list.Data, model{id, "model", modelsCreated, "fakellm"})
	}
	writeJSON(w, http.StatusOK, list)
}
