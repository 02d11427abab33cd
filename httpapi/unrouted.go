package httpapi

import (
	"net/http"
	"strings"
	"sync"

	"github.com/julienschmidt/httprouter"
)

// Requests no route takes: a client with a wrong base URL (POST /messages, POST
// /v1/v1/messages, POST /chat/completions) is answered in its own API's error shape, so its
// SDK shows the message, with the route it most likely meant.

// servedRoutes are the model routes a wrong path is compared with, the longest of those
// sharing a suffix first.
var servedRoutes = []string{"/v1/messages/count_tokens", "/v1/messages", "/v1/completions", "/v1/chat/completions",
	"/v1/responses", "/v1/embeddings", "/v1/models", batchRoute}

// anthropicClient reports whether r comes from an Anthropic client: its SDKs and Claude Code
// send anthropic-version on every request, and a key in x-api-key rather than a bearer token.
func anthropicClient(r *http.Request) bool {
	return r.Header.Get("anthropic-version") != "" || r.Header.Get("x-api-key") != "" && r.Header.Get("Authorization") == ""
}

// failAs writes a in the error shape of r's client.
func failAs(w http.ResponseWriter, r *http.Request, a apiError) {
	if anthropicClient(r) {
		setAnthropicRequestID(w, r)
		failMessages(w, a)
		return
	}
	a.write(w)
}

// byClient serves a route both APIs' clients call (/v1/models, /admin) with anthropic for an
// Anthropic client, with its request-id, and with openai for the others: the same handler
// behind auth answering in each API's error shape, so a 401 is in the client's.
func byClient(openai, anthropic httprouter.Handle) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		if anthropicClient(r) {
			setAnthropicRequestID(w, r)
			anthropic(w, r, ps)
			return
		}
		openai(w, r, ps)
	}
}

// routeHint names the served route a wrong path most likely meant: the one that ends with
// it (a base URL without /v1) or that it ends with (one with a prefix too many, such as
// /v1/v1/messages); "" when none does.
func routeHint(path string) string {
	for _, k := range servedRoutes {
		if path != k && len(path) > 1 && (strings.HasSuffix(k, path) || strings.HasSuffix(path, k)) {
			return k
		}
	}
	return ""
}

// notFound answers a request for a path no route serves.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	msg := "no route for " + r.Method + " " + clip(r.URL.Path, 200)
	if k := routeHint(r.URL.Path); k != "" {
		msg += "; did you mean " + k + "? An OpenAI client's base URL is the gateway's address with /v1, an Anthropic client's the address alone"
	} else {
		msg += "; the gateway serves /v1/chat/completions, /v1/responses, /v1/messages, /v1/embeddings, /v1/completions and /v1/models"
	}
	failAs(w, r, apiError{status: http.StatusNotFound, code: "not_found", typ: "invalid_request_error", message: msg})
}

// methodNotAllowed answers a request whose path is served, but not for its method.
func (s *Server) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	failAs(w, r, apiError{status: http.StatusMethodNotAllowed, code: "method_not_allowed", typ: "invalid_request_error",
		message: r.Method + " is not allowed on " + clip(r.URL.Path, 200)})
}

// setAnthropicRequestID gives an answer to an Anthropic client Anthropic's request-id header
// beside X-Request-Id, with the same value: the Anthropic SDKs read it (a message's
// _request_id, an error's requestID).
func setAnthropicRequestID(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("request-id", requestID(r.Context()))
}

// anthropicID is setAnthropicRequestID on every answer of a Messages route.
func anthropicID(next httprouter.Handle) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		setAnthropicRequestID(w, r)
		next(w, r, ps)
	}
}

// maxSeenRoutes bounds the unknown routes remembered: a scanner's thousands of paths must
// not grow the set without end; past it every unknown route is logged at debug.
const maxSeenRoutes = 512

// seenRoutes are the unknown routes already logged at info: each is worth one line that
// says a client is misconfigured, not one per request of a client that keeps trying.
type seenRoutes struct {
	mu   sync.Mutex
	seen map[string]bool
}

// first reports whether key is seen for the first time, and remembers it.
func (s *seenRoutes) first(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen[key] || len(s.seen) >= maxSeenRoutes {
		return false
	}
	if s.seen == nil {
		s.seen = map[string]bool{}
	}
	s.seen[key] = true
	return true
}
