package httpapi

import "net/http"

// foreign refuses, with no API keys, a request whose Host or Origin the Origins policy does
// not serve, on every route and whatever its content type, and says whether it did. The
// answer is 403 forbidden_origin naming the header and how to allow it; like the limits'
// refusals it closes the connection, so nothing of the request's body is read.
func (s *Server) foreign(w http.ResponseWriter, r *http.Request) bool {
	if s.opts.Origins == nil || s.keysOn() {
		return false
	}
	err := s.opts.Origins.Check(r.Host, r.Header.Values("Origin"))
	if err == nil {
		return false
	}
	s.refuse(w, r, apiError{status: http.StatusForbidden, code: "forbidden_origin", typ: "permission_error",
		message: err.Error()})
	return true
}
