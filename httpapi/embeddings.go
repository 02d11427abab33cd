package httpapi

import (
	"encoding/json"
	"io"
	"net/http"

	"github.com/tollgate/tollgate/providers/llm"
)

// embeddingsAPI is POST /v1/embeddings (SPEC §19): OpenAI's shape in and out, through the
// same admission as chat. Backends answer with one whole embeddings list (llm.Chunk with
// Format FormatEmbeddings), relayed as it came.
var embeddingsAPI = &ingress{
	route:  "/v1/embeddings",
	format: llm.FormatEmbeddings,
	parse:  func(body []byte, _ *http.Request) (*parsed, *apiError) { return only(parseEmbeddings(body)) },
	fail:   failOpenAI,
	relay: func(s *Server, w http.ResponseWriter, r *http.Request, st llm.Stream, _ *parsed, rec *record) {
		s.relayList(w, r, st, rec)
	},
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

// relayList writes an embeddings answer: the stream's one whole embeddings list as it came.
// A stream that ends without one, or has anything else, is the backend's failure (502).
func (s *Server) relayList(w http.ResponseWriter, r *http.Request, st llm.Stream, rec *record) {
	ch, err := st.Next()
	if err == nil && (!ch.Complete || ch.Format != llm.FormatEmbeddings) {
		err = &llm.Error{Kind: llm.KindUpstream, Provider: rec.provider, Message: "the backend did not answer with an embeddings list"}
	}
	if err == io.EOF {
		err = &llm.Error{Kind: llm.KindUpstreamTruncated, Provider: rec.provider, Message: "the backend's answer ended without an embeddings list"}
	}
	if err != nil {
		if a, ok := s.answerError(r, err, rec); ok {
			a.write(w)
		}
		return
	}
	if ch.Usage != nil {
		rec.usage = *ch.Usage
	}
	rec.ttfb = s.opts.Now().Sub(rec.start)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(ch.Raw); err != nil {
		rec.clientGone = true
	}
}
