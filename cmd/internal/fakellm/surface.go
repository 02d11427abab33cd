package fakellm

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/fnv"
	"math"
	"net/http"
	"strconv"
	"strings"
)

// EmbeddingDims is the size of fakellm's vectors when the client asks for none.
const EmbeddingDims = 8

// embedCall is an embeddings request: OpenAI's /v1/embeddings or Gemini's embedContent
// (batch: batchEmbedContents).
type embedCall struct {
	texts  []string
	dims   int
	base64 bool
	batch  bool
	ollama bool // Ollama's native /api/embed
}

// vector is the fake embedding of text: dims numbers in [-1, 1) that depend only on the
// text, so equal inputs embed equally and a test can tell inputs apart.
func vector(text string, dims int) []float32 {
	v := make([]float32, dims)
	h := fnv.New64a()
	_, _ = h.Write([]byte(text))
	x := h.Sum64()
	for i := range v {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		v[i] = float32(x>>40)/float32(1<<23) - 1
	}
	return v
}

// parseEmbeddings reads an OpenAI embeddings request: input a string, strings or token
// arrays (embedded as their decimal text).
func parseEmbeddings(w http.ResponseWriter, r *http.Request, c *call) error {
	var req struct {
		Model          string          `json:"model"`
		Input          json.RawMessage `json:"input"`
		EncodingFormat string          `json:"encoding_format"`
		Dimensions     int             `json:"dimensions"`
	}
	if err := readBody(w, r, &req); err != nil {
		return err
	}
	texts, err := inputTexts(req.Input)
	if err != nil {
		return err
	}
	c.model = req.Model
	c.embed = &embedCall{texts: texts, dims: req.Dimensions, base64: req.EncodingFormat == "base64"}
	for _, t := range texts {
		c.prompt += countFields(t)
	}
	return nil
}

// inputTexts reads an embeddings input or a completions prompt as texts.
func inputTexts(raw json.RawMessage) ([]string, error) {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil && len(many) > 0 {
		return many, nil
	}
	var ids []int
	if json.Unmarshal(raw, &ids) == nil && len(ids) > 0 {
		return []string{joinInts(ids)}, nil
	}
	var lists [][]int
	if json.Unmarshal(raw, &lists) == nil && len(lists) > 0 {
		out := make([]string, len(lists))
		for i, l := range lists {
			out[i] = joinInts(l)
		}
		return out, nil
	}
	return nil, errors.New("input: expected a string, an array of strings or of token arrays")
}

func joinInts(ids []int) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(id)
	}
	return strings.Join(s, " ")
}

// parseOllamaEmbed reads Ollama's native POST /api/embed: input a string or strings.
func parseOllamaEmbed(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := parseEmbeddings(w, r, c); err != nil {
		return err
	}
	c.embed.ollama, c.embed.base64 = true, false
	return nil
}

// parseGeminiEmbed reads Gemini's embedContent or batchEmbedContents body.
func parseGeminiEmbed(w http.ResponseWriter, r *http.Request, c *call) error {
	type one struct {
		Content struct {
			Parts []struct {
				Text string `json:"text"`
			} `json:"parts"`
		} `json:"content"`
		OutputDimensionality int `json:"outputDimensionality"`
	}
	var req struct {
		one
		Requests []one `json:"requests"`
	}
	if err := readBody(w, r, &req); err != nil {
		return err
	}
	list := []one{req.one}
	if c.embed.batch {
		list = req.Requests
		if len(list) == 0 || len(list) > 100 {
			return errors.New("requests: between 1 and 100 requests are allowed")
		}
	}
	for _, o := range list {
		var text strings.Builder
		for _, p := range o.Content.Parts {
			text.WriteString(p.Text)
		}
		if text.Len() == 0 {
			return errors.New("content: empty text")
		}
		c.embed.texts = append(c.embed.texts, text.String())
		c.embed.dims = o.OutputDimensionality
		c.prompt += countFields(text.String())
	}
	return nil
}

// embedWhole is the answer to an embeddings call, in OpenAI's shape or Gemini's.
func embedWhole(c *call) []byte {
	e := c.embed
	dims := e.dims
	if dims <= 0 {
		dims = EmbeddingDims
	}
	if e.ollama {
		vecs := make([][]float32, len(e.texts))
		for i, t := range e.texts {
			vecs[i] = vector(t, dims)
		}
		b, _ := json.Marshal(map[string]any{"model": c.model, "embeddings": vecs, "total_duration": 14143917,
			"load_duration": 1019500, "prompt_eval_count": c.prompt})
		return b
	}
	if c.api == apiGemini {
		type values struct {
			Values []float32 `json:"values"`
		}
		var v any
		if e.batch {
			list := make([]values, len(e.texts))
			for i, t := range e.texts {
				list[i] = values{vector(t, dims)}
			}
			v = map[string]any{"embeddings": list}
		} else {
			v = map[string]any{"embedding": values{vector(e.texts[0], dims)}}
		}
		b, _ := json.Marshal(v)
		return b
	}
	type item struct {
		Object    string `json:"object"`
		Index     int    `json:"index"`
		Embedding any    `json:"embedding"`
	}
	data := make([]item, len(e.texts))
	for i, t := range e.texts {
		vec := vector(t, dims)
		data[i] = item{Object: "embedding", Index: i, Embedding: vec}
		if e.base64 {
			data[i].Embedding = encodeVector(vec)
		}
	}
	b, _ := json.Marshal(map[string]any{"object": "list", "data": data, "model": c.model,
		"usage": map[string]int{"prompt_tokens": c.prompt, "total_tokens": c.prompt}})
	return b
}

func encodeVector(vec []float32) string {
	b := make([]byte, 4*len(vec))
	for i, f := range vec {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return base64.StdEncoding.EncodeToString(b)
}

// parseCompletions reads a legacy completions request: its prompt, suffix and output cap.
func parseCompletions(w http.ResponseWriter, r *http.Request, c *call) error {
	var req struct {
		Model         string          `json:"model"`
		Prompt        json.RawMessage `json:"prompt"`
		Suffix        string          `json:"suffix"`
		Stream        bool            `json:"stream"`
		Echo          bool            `json:"echo"`
		MaxTokens     *int            `json:"max_tokens"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := readBody(w, r, &req); err != nil {
		return err
	}
	texts, err := inputTexts(req.Prompt)
	if err != nil {
		return err
	}
	c.model, c.stream = req.Model, req.Stream
	c.includeUsage = req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	if req.MaxTokens != nil {
		c.maxTokens = *req.MaxTokens
	}
	c.completion = &completionCall{prompt: strings.Join(texts, ""), suffix: req.Suffix, echo: req.Echo}
	c.prompt = countFields(c.completion.prompt) + countFields(req.Suffix)
	return nil
}

// completionCall is a legacy completions request.
type completionCall struct {
	prompt, suffix string
	echo           bool
}

// completionStream writes text_completion chunks.
type completionStream struct{ c *call }

func (s completionStream) chunk(e *emitter, text, finish string, usage bool) error {
	b := append([]byte(nil), `data: {"id":"cmpl-fakellm-`...)
	b = append(b, s.c.id...)
	b = append(b, `","object":"text_completion","created":`...)
	b = strconv.AppendInt(b, s.c.created, 10)
	b = append(b, `,"model":`...)
	b = appendString(b, s.c.model)
	if usage {
		b = append(b, `,"choices":[],"usage":`...)
		b = appendChatUsage(b, s.c)
		return e.send(append(b, "}\n\n"...))
	}
	b = append(b, `,"choices":[{"index":0,"text":`...)
	b = appendString(b, text)
	b = append(b, `,"logprobs":null,"finish_reason":`...)
	if finish == "" {
		b = append(b, "null"...)
	} else {
		b = appendString(b, finish)
	}
	return e.send(append(b, "}]}\n\n"...))
}

func (s completionStream) start(e *emitter) error {
	if s.c.completion.echo {
		return s.chunk(e, s.c.completion.prompt, "", false)
	}
	return nil
}

func (s completionStream) reasoning(e *emitter, text string) error { return nil }

func (s completionStream) content(e *emitter, text string) error {
	return s.chunk(e, text, "", false)
}

func (s completionStream) fail(e *emitter) error {
	return e.send(append(append([]byte("data: "), errorBody(apiChat, internalError(apiChat))...), "\n\n"...))
}

func (s completionStream) finish(e *emitter) error {
	if err := s.chunk(e, "", chatFinish(s.c), false); err != nil {
		return err
	}
	if s.c.includeUsage {
		if err := s.chunk(e, "", "", true); err != nil {
			return err
		}
	}
	return e.send([]byte("data: [DONE]\n\n"))
}

// completionWhole is a whole text_completion.
func completionWhole(c *call) []byte {
	text := strings.Join(c.pieces, "")
	if c.completion.echo {
		text = c.completion.prompt + text
	}
	b := append([]byte(nil), `{"id":"cmpl-fakellm-`...)
	b = append(b, c.id...)
	b = append(b, `","object":"text_completion","created":`...)
	b = strconv.AppendInt(b, c.created, 10)
	b = append(b, `,"model":`...)
	b = appendString(b, c.model)
	b = append(b, `,"choices":[{"index":0,"text":`...)
	b = appendString(b, text)
	b = append(b, `,"logprobs":null,"finish_reason":`...)
	b = appendString(b, chatFinish(c))
	b = append(b, `}],"usage":`...)
	b = appendChatUsage(b, c)
	return append(b, '}')
}
