package httpapi

import (
	"errors"
	"net/http"

	"github.com/julienschmidt/httprouter"
)

// problemLister is an error that lists what is wrong with a configuration file, one problem
// an entry (cmd/internal/app's InvalidConfig).
type problemLister interface {
	error
	Problems() []string
}

// reload is POST /admin/reload (SPEC §16): the summary of what changed, or, for an invalid
// file (nothing changed), 400 invalid_config in SPEC §4's shape with every problem in
// "errors". Another failure is a 500 that retrying does not fix.
func (s *Server) reload(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	summary, err := s.opts.Reload(r.Context())
	var bad problemLister
	switch {
	case errors.As(err, &bad):
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{
			"message": bad.Error(), "type": "invalid_request_error", "code": "invalid_config", "param": nil,
			"errors": bad.Problems(),
		}})
	case err != nil:
		w.Header().Set("x-should-retry", "false")
		writeJSON(w, http.StatusInternalServerError, map[string]any{"error": map[string]any{
			"message": err.Error(), "type": "api_error", "code": "reload_failed", "param": nil,
		}})
	default:
		writeJSON(w, http.StatusOK, summary)
	}
}
