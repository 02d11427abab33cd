package fakellm

import (
	"net/http"
	"strconv"
	"strings"
)

// geminiStream writes GenerateContentResponse objects: as SSE data events (alt=sse) or as the
// elements of one JSON array streamed piece by piece. The last object carries finishReason
// and usageMetadata.
type geminiStream struct {
	c     *call
	buf   []byte
	first bool // no element written yet (array framing)
}

func newGeminiStream(c *call) *geminiStream {
	return &geminiStream{c: c, buf: make([]byte, 0, 512), first: true}
}

// frame starts one object with its SSE or array framing; close finishes and sends it.
func (s *geminiStream) frame() []byte {
	b := s.buf[:0]
	switch {
	case s.c.geminiSSE:
		b = append(b, "data: "...)
	case s.first:
		b = append(b, '[')
	default:
		b = append(b, ",\r\n"...)
	}
	s.first = false
	return b
}

func (s *geminiStream) close(e *emitter, b []byte, last bool) error {
	switch {
	case s.c.geminiSSE:
		b = append(b, "\n\n"...)
	case last:
		b = append(b, ']')
	}
	s.buf = b
	return e.send(b)
}

// part sends one object holding one text part.
func (s *geminiStream) part(e *emitter, text string, thought bool) error {
	b := s.frame()
	b = appendGeminiCandidate(b, text, thought, "")
	b = appendGeminiTail(b, s.c, false)
	return s.close(e, b, false)
}

func (s *geminiStream) start(e *emitter) error { return nil }

func (s *geminiStream) reasoning(e *emitter, text string) error { return s.part(e, text, true) }

func (s *geminiStream) content(e *emitter, text string) error { return s.part(e, text, false) }

func (s *geminiStream) finish(e *emitter) error {
	b := s.frame()
	b = appendGeminiCandidate(b, "", false, geminiFinish(s.c))
	b = appendGeminiTail(b, s.c, true)
	return s.close(e, b, true)
}

// fail sends a Gemini error object in the stream, as the API does when it fails after a 200.
func (s *geminiStream) fail(e *emitter) error {
	b := s.frame()
	b = append(b, errorBody(apiGemini, internalError(apiGemini))...)
	return s.close(e, b, true)
}

func geminiFinish(c *call) string {
	if c.truncated {
		return "MAX_TOKENS"
	}
	return "STOP"
}

// appendGeminiCandidate opens a response object with one candidate of one part.
func appendGeminiCandidate(b []byte, text string, thought bool, finish string) []byte {
	b = append(b, `{"candidates":[{"content":{"parts":[{"text":`...)
	b = appendString(b, text)
	if thought {
		b = append(b, `,"thought":true`...)
	}
	b = append(b, `}],"role":"model"}`...)
	if finish != "" {
		b = append(b, `,"finishReason":"`...)
		b = append(b, finish...)
		b = append(b, '"')
	}
	return append(b, `,"index":0}]`...)
}

// appendGeminiTail closes a response object: usage (full on the last one), model, id.
func appendGeminiTail(b []byte, c *call, last bool) []byte {
	b = append(b, `,"usageMetadata":{"promptTokenCount":`...)
	b = strconv.AppendInt(b, int64(c.prompt), 10)
	total := c.prompt
	if last {
		out := len(c.pieces)
		total += c.completionTokens()
		b = append(b, `,"candidatesTokenCount":`...)
		b = strconv.AppendInt(b, int64(out), 10)
		if len(c.reasoning) > 0 {
			b = append(b, `,"thoughtsTokenCount":`...)
			b = strconv.AppendInt(b, int64(len(c.reasoning)), 10)
		}
	}
	b = append(b, `,"totalTokenCount":`...)
	b = strconv.AppendInt(b, int64(total), 10)
	b = append(b, `},"modelVersion":`...)
	b = appendString(b, c.model)
	b = append(b, `,"responseId":"fakellm-`...)
	b = append(b, c.id...)
	return append(b, `"}`...)
}

// geminiWhole is a non-streaming GenerateContentResponse.
func geminiWhole(c *call) []byte {
	b := append([]byte(nil), `{"candidates":[{"content":{"parts":[`...)
	if len(c.reasoning) > 0 {
		b = append(b, `{"text":`...)
		b = appendString(b, strings.Join(c.reasoning, ""))
		b = append(b, `,"thought":true},`...)
	}
	b = append(b, `{"text":`...)
	b = appendString(b, strings.Join(c.pieces, ""))
	b = append(b, `}],"role":"model"},"finishReason":"`...)
	b = append(b, geminiFinish(c)...)
	b = append(b, `","index":0}]`...)
	return appendGeminiTail(b, c, true)
}

// listGeminiModels answers GET /v1beta/models.
func (s *Server) listGeminiModels(w http.ResponseWriter, r *http.Request) {
	type model struct {
		Name                       string   `json:"name"`
		DisplayName                string   `json:"displayName"`
		InputTokenLimit            int      `json:"inputTokenLimit"`
		OutputTokenLimit           int      `json:"outputTokenLimit"`
		SupportedGenerationMethods []string `json:"supportedGenerationMethods"`
	}
	var list struct {
		Models []model `json:"models"`
	}
	for _, id := range s.opts.Models {
		list.Models = append(list.Models, model{"models/" + id, id, 1048576, 65536,
			[]string{"generateContent", "streamGenerateContent", "countTokens"}})
	}
	writeJSON(w, http.StatusOK, list)
}
