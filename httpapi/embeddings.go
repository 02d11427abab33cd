package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/tollgate/tollgate/providers/llm"
)

// embeddingsAPI is POST /v1/embeddings (SPEC §19): OpenAI's shape in and out, through the
// same admission as chat. Backends answer with one whole embeddings list (llm.Chunk with
// Format FormatEmbeddings), relayed as it came (embeddingsAnswer).
var embeddingsAPI = &ingress{
	route:  "/v1/embeddings",
	native: llm.FormatEmbeddings,
	parse:  func(body []byte, _ *http.Request) (*parsed, *apiError) { return only(parseEmbeddings(body)) },
	fail:   failOpenAI,
	answer: func(_ *Server, _ *parsed, rec *record) answerFormat { return embeddingsAnswer{provider: rec.provider} },
}

// embeddingsBody is an embeddings request's fields the gateway reads; the backend receives
// the body as sent.
type embeddingsBody struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat *string         `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
	User           string          `json:"user"`
}

// parseEmbeddings decodes and checks an embeddings request body.
func parseEmbeddings(body []byte) (*llm.Request, *apiError) {
	var b embeddingsBody
	trimmed, a := decodeObject(body, &b)
	if a != nil {
		return nil, a
	}
	if b.Model == "" {
		return nil, invalidf("model", "missing required field: model (an embedding model's id; GET /v1/models lists them with spec.type)")
	}
	in, a := parseInputs("input", b.Input)
	if a != nil {
		return nil, a
	}
	e := &llm.Embed{Texts: in.texts, Tokens: in.tokens}
	if f := b.EncodingFormat; f != nil {
		switch *f {
		case "float":
		case "base64":
			e.Base64 = true
		default:
			return nil, invalidf("encoding_format", "encoding_format must be float or base64, got %q", *f)
		}
	}
	if d := b.Dimensions; d != nil {
		if *d < 1 {
			return nil, invalidf("dimensions", "dimensions must be at least 1, got %d", *d)
		}
		e.Dimensions = *d
	}
	return &llm.Request{Model: b.Model, User: b.User, Embed: e,
		Native: &llm.Native{Format: llm.FormatEmbeddings, Body: trimmed}}, nil
}

// embeddingsAnswer is an embeddings answer: the stream's one whole embeddings list, which
// the relay writes as it came (ingress.native). A stream that ends without one, or has
// anything else, is the backend's failure (502). It is never streamed.
type embeddingsAnswer struct{ provider string }

func (e embeddingsAnswer) whole() wholeSink { return e }

func (e embeddingsAnswer) add(*llm.Chunk) error {
	return &llm.Error{Kind: llm.KindUpstream, Provider: e.provider, Message: "the backend did not answer with an embeddings list"}
}

func (e embeddingsAnswer) build() (any, error) {
	return nil, &llm.Error{Kind: llm.KindUpstreamTruncated, Provider: e.provider, Message: "the backend's answer ended without an embeddings list"}
}
