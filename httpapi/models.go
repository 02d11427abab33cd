package httpapi

import (
	"net/http"
	"strings"

	"github.com/julienschmidt/httprouter"

	"github.com/tollgate/tollgate/providers/llm"
)

func (s *Server) listModels(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	cards := s.opts.Gateway.Models()
	if cards == nil {
		cards = []llm.ModelCard{}
	}
	writeJSON(w, http.StatusOK, struct {
		Object string          `json:"object"`
		Data   []llm.ModelCard `json:"data"`
	}{"list", cards})
}

// getModel serves /v1/models/{id}; ids contain slashes ("nvidia/meta/llama-3.3-70b-instruct").
func (s *Server) getModel(w http.ResponseWriter, _ *http.Request, ps httprouter.Params) {
	id := strings.TrimPrefix(ps.ByName("id"), "/")
	for _, c := range s.opts.Gateway.Models() {
		if c.ID == id {
			writeJSON(w, http.StatusOK, c)
			return
		}
	}
	toAPIError(&llm.Error{Kind: llm.KindModelNotFound, Param: "model",
		Message: "model \"" + id + "\" does not exist; GET /v1/models lists the available ids"}, 0).write(w)
}
