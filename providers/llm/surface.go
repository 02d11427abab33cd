package llm

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"unicode/utf8"
)

// The formats that have no translation to chat (SPEC §19): only a backend that serves them
// itself can answer them (Surface), and only a model of the matching Type.
const (
	FormatEmbeddings  Format = "openai-embeddings"  // POST /v1/embeddings
	FormatCompletions Format = "openai-completions" // POST /v1/completions (legacy, fill-in-the-middle)
)

// The model types a card declares (Spec.Type).
const (
	TypeChat      = "chat"      // chat, Responses, Messages and legacy completions
	TypeEmbedding = "embedding" // embeddings only
)

// Surface is the optional capability of a backend that serves formats beyond chat: Serves
// reports whether it answers a call in format f (FormatEmbeddings, FormatCompletions). The
// gateway refuses such a call before admission when the backend lacks it; Open then sees
// only calls it serves, marked by Request.Native.
type Surface interface {
	Serves(f Format) bool
}

// Standalone reports whether f cannot be translated to chat, so that only a backend that
// serves it (Surface) can answer it.
func (f Format) Standalone() bool { return f == FormatEmbeddings || f == FormatCompletions }

// Op is the format of the call r is: FormatChat for chat and the formats translated to it,
// else its standalone format.
func (r *Request) Op() Format {
	if r.Native != nil && r.Native.Format.Standalone() {
		return r.Native.Format
	}
	return FormatChat
}

// ModelType is a card's type with its default: TypeChat when none is declared.
func (s *Spec) ModelType() string {
	if s.Type == "" {
		return TypeChat
	}
	return s.Type
}

// Embed is an embeddings call as the gateway read it from OpenAI's shape: the inputs, and
// what the answer must look like. The request's Native body is what OpenAI-compatible
// backends receive; translating adapters (Gemini, Ollama's native API) build theirs from Embed.
type Embed struct {
	// Texts are the inputs given as text; Tokens those given as token arrays. One of the two
	// is set, with at least one input.
	Texts  []string
	Tokens [][]int
	// Dimensions is the client's requested vector size; 0 when it set none.
	Dimensions int
	// Base64 is set when the client asked for encoding_format "base64": each vector as the
	// base64 of its little-endian float32s, as OpenAI sends it.
	Base64 bool
}

// Completion is a legacy completions call's prompt as the gateway read it: what it estimates
// and logs. The backend receives the client's body (Native.Body).
type Completion struct {
	Prompts      []string // the prompt, or each of a batch of prompts, given as text
	PromptTokens int      // how many token ids the prompts given as token arrays hold
	Suffix       string   // the text after the cursor, for fill-in-the-middle
}

// Count is how many inputs e holds.
func (e *Embed) Count() int { return len(e.Texts) + len(e.Tokens) }

// EstimateTokens estimates e's input tokens, as EstimatePromptTokens does for text: a token
// array counts its length.
func (e *Embed) EstimateTokens() int {
	n := 0
	for _, s := range e.Texts {
		n += TextTokens(s)
	}
	for _, t := range e.Tokens {
		n += len(t)
	}
	return n
}

// TextTokens estimates the tokens of s: about four bytes a token, one a character for text
// that is not ASCII.
func TextTokens(s string) int {
	if b, c := len(s), utf8.RuneCountInString(s); c < b {
		return c
	}
	return (len(s) + 3) / 4
}

// Vectors is an embeddings answer translated from a backend's own format: one vector per
// input, in input order, and the prompt tokens counted (0 when the backend said none).
type Vectors struct {
	Model        string
	Vectors      [][]float32
	PromptTokens int
}

// EmbeddingsBody is v as OpenAI's embeddings answer ("object": "list"), each vector as floats
// or, with asBase64, as OpenAI's base64 of little-endian float32s.
func EmbeddingsBody(v *Vectors, asBase64 bool) EmbeddingList {
	out := EmbeddingList{Object: "list", Model: v.Model, Data: make([]EmbeddingItem, len(v.Vectors)),
		Usage: EmbeddingUsage{PromptTokens: v.PromptTokens, TotalTokens: v.PromptTokens}}
	for i, vec := range v.Vectors {
		it := EmbeddingItem{Object: "embedding", Index: i}
		if asBase64 {
			it.Embedding = Base64Vector(vec)
		} else {
			it.Embedding = vec
		}
		out.Data[i] = it
	}
	return out
}

// EmbeddingList is OpenAI's embeddings answer.
type EmbeddingList struct {
	Object string          `json:"object"`
	Data   []EmbeddingItem `json:"data"`
	Model  string          `json:"model"`
	Usage  EmbeddingUsage  `json:"usage"`
}

// EmbeddingItem is one vector of an EmbeddingList; Embedding is a []float32 or a base64 string.
type EmbeddingItem struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"`
}

// EmbeddingUsage is an embeddings answer's usage.
type EmbeddingUsage struct {
	PromptTokens int `json:"prompt_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

// Base64Vector is vec as OpenAI's encoding_format "base64" sends it: the base64 of its
// float32s, little-endian.
func Base64Vector(vec []float32) string {
	b := make([]byte, 4*len(vec))
	for i, f := range vec {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return base64.StdEncoding.EncodeToString(b)
}
