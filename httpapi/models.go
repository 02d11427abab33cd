package httpapi

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/tollgate/tollgate/providers/llm"
)

// GET /v1/models and /v1/models/{id}: OpenAI's model list, or Anthropic's when the request
// carries anthropic-version (its SDKs' models.list and models.retrieve send it on every
// call). Both kinds of entry have the spec card of SPEC §6.

func (s *Server) listModels(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	cards := s.opts.Gateway.Models()
	if cards == nil {
		cards = []llm.ModelCard{}
	}
	if r.Header.Get("anthropic-version") != "" {
		s.listAnthropicModels(w, r, cards)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Object string          `json:"object"`
		Data   []llm.ModelCard `json:"data"`
	}{"list", cards})
}

// getModel serves /v1/models/{id}; ids contain slashes ("nvidia/meta/llama-3.3-70b-instruct").
func (s *Server) getModel(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	id := strings.TrimPrefix(ps.ByName("id"), "/")
	anthropic := r.Header.Get("anthropic-version") != ""
	for _, c := range s.opts.Gateway.Models() {
		if c.ID != id {
			continue
		}
		if anthropic {
			setAnthropicRequestID(w, r)
			writeJSON(w, http.StatusOK, anthropicModel(c))
		} else {
			writeJSON(w, http.StatusOK, c)
		}
		return
	}
	a := toAPIError(&llm.Error{Kind: llm.KindModelNotFound, Param: "model",
		Message: "model \"" + id + "\" does not exist; GET /v1/models lists the available ids"}, 0)
	if anthropic {
		setAnthropicRequestID(w, r)
		failMessages(w, a)
		return
	}
	a.write(w)
}

// anthropicModelInfo is an entry of Anthropic's model list. What the card does not know is
// null, as Anthropic's own entries say of a field that does not apply: deprecation and
// retirement dates, the model line, the capabilities (its SDKs' types have every field).
type anthropicModelInfo struct {
	Type           string    `json:"type"` // "model"
	ID             string    `json:"id"`
	DisplayName    string    `json:"display_name"`
	CreatedAt      string    `json:"created_at"` // RFC 3339
	Lifecycle      string    `json:"lifecycle"`  // "active": a configured model is callable
	MaxInputTokens *int      `json:"max_input_tokens"`
	MaxTokens      *int      `json:"max_tokens"`
	Capabilities   *struct{} `json:"capabilities"`
	DeprecatedAt   *string   `json:"deprecated_at"`
	RetiresAt      *string   `json:"retires_at"`
	Line           *string   `json:"line"`
	Spec           llm.Spec  `json:"spec"`
}

func anthropicModel(c llm.ModelCard) anthropicModelInfo {
	return anthropicModelInfo{Type: "model", ID: c.ID, DisplayName: c.ID,
		CreatedAt: time.Unix(c.Created, 0).UTC().Format(time.RFC3339), Lifecycle: "active",
		MaxInputTokens: c.Spec.ContextWindow, MaxTokens: c.Spec.MaxOutputTokens, Spec: c.Spec}
}

// Anthropic's page sizes: 20 unless the client asks, at most 1000.
const (
	anthropicPageSize    = 20
	anthropicMaxPageSize = 1000
)

// listAnthropicModels answers one page of Anthropic's list: limit entries after after_id or
// before before_id, in id order, with has_more and the page's first and last ids (null on
// an empty page), as Anthropic's SDKs page through them.
func (s *Server) listAnthropicModels(w http.ResponseWriter, r *http.Request, cards []llm.ModelCard) {
	setAnthropicRequestID(w, r)
	q := r.URL.Query()
	limit := anthropicPageSize
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > anthropicMaxPageSize {
			failMessages(w, *invalidf("limit", "limit must be an integer from 1 to %d, got %q", anthropicMaxPageSize, v))
			return
		}
		limit = n
	}
	lo, hi := 0, len(cards)
	for i, c := range cards {
		if c.ID == q.Get("after_id") {
			lo = i + 1
		}
		if c.ID == q.Get("before_id") {
			hi = i
		}
	}
	hasMore := false
	if hi-lo > limit {
		hasMore = true
		if q.Get("before_id") != "" {
			lo = hi - limit // the page that ends just before before_id
		} else {
			hi = lo + limit
		}
	}
	page := struct {
		Data    []anthropicModelInfo `json:"data"`
		HasMore bool                 `json:"has_more"`
		FirstID *string              `json:"first_id"`
		LastID  *string              `json:"last_id"`
	}{Data: []anthropicModelInfo{}, HasMore: hasMore}
	for _, c := range cards[lo:max(lo, hi)] {
		page.Data = append(page.Data, anthropicModel(c))
	}
	if n := len(page.Data); n > 0 {
		page.FirstID, page.LastID = &page.Data[0].ID, &page.Data[n-1].ID
	}
	writeJSON(w, http.StatusOK, page)
}
