package actors

import (
	"fmt"

	"github.com/tollgate/tollgate/providers/llm"
)

// refuses is why the model r leads to cannot serve req (SPEC §19), or nil when it can. The
// answer is 400 invalid_request; it is decided before admission and never falls back.
func (r *route) refuses(req *llm.Request) *llm.Error {
	return refusal(r.id, r.kind, r.typ, r.window, r.backend, req)
}

// refusal is refuses' decision on the model's id, its provider's kind, its type (a card's
// ModelType), its context window (0 unknown) and its backend: an embeddings call needs an
// embedding model, every other call a chat model, and a format without a translation to
// chat a backend that serves it (llm.Surface). An embeddings input whose estimated tokens
// pass the model's window is refused naming the input.
func refusal(id, kind, typ string, window int, b llm.Backend, req *llm.Request) *llm.Error {
	invalid := func(param, format string, args ...any) *llm.Error {
		return &llm.Error{Kind: llm.KindInvalidRequest, Param: param, Message: fmt.Sprintf(format, args...)}
	}
	op := req.Op()
	if op.Standalone() {
		if s, ok := b.(llm.Surface); !ok || !s.Serves(op) {
			what := map[llm.Format]string{llm.FormatEmbeddings: "embeddings", llm.FormatCompletions: "legacy completions (POST /v1/completions)"}[op]
			return invalid("model", "model %q: its backend (kind %s) has no %s", id, kind, what)
		}
	}
	switch {
	case op == llm.FormatEmbeddings && typ != llm.TypeEmbedding:
		return invalid("model", "model %q is a %s model, not an embedding model: embeddings need a model whose card says type embedding", id, typ)
	case op != llm.FormatEmbeddings && typ == llm.TypeEmbedding:
		return invalid("model", "model %q is an embedding model: it serves only POST /v1/embeddings", id)
	}
	if e := req.Embed; e != nil && window > 0 {
		for i, s := range e.Texts {
			if n := llm.TextTokens(s); n > window {
				return invalid(fmt.Sprintf("input[%d]", i), "input[%d] is about %d tokens, more than model %q takes (context_window %d)", i, n, id, window)
			}
		}
		for i, t := range e.Tokens {
			if len(t) > window {
				return invalid(fmt.Sprintf("input[%d]", i), "input[%d] has %d tokens, more than model %q takes (context_window %d)", i, len(t), id, window)
			}
		}
	}
	return nil
}
