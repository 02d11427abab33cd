// Package httpapi is Tollgate's HTTP surface: the OpenAI-compatible API (Chat Completions,
// Responses, batches), Anthropic's Messages API, the admin endpoints, the console's routes
// (httpapi/ui) and the error mapping of SPEC §4. It talks to the admission machinery only
// through what Options hands it (the Gateway interface below, BatchGateway when the gateway
// has it, the State and Reload functions) and never imports the actors package.
package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/httpapi/guard"
	"github.com/tollgate/tollgate/httpapi/ui"
	"github.com/tollgate/tollgate/providers/llm"
)

// Gateway is what the HTTP layer needs from the admission machinery.
type Gateway interface {
	// Start admits a call and blocks until it runs or is turned away; see actors.Gateway.Start.
	// The Served it returns describes the call also with an error.
	Start(ctx context.Context, model string, prio llm.Priority, req *llm.Request) (llm.Served, error)
	// Models lists the model cards.
	Models() []llm.ModelCard
	// Draining reports that the gateway admits nothing new.
	Draining() bool
	// RetryAfter is the default wait "busy" answers advise.
	RetryAfter() time.Duration
}

// Options configure the handler. Zero values are documented per field.
type Options struct {
	Gateway Gateway
	// State returns the /admin/state document; nil disables the endpoint.
	State func() any
	// MaxBodyBytes caps a request body; 0 → 8 MiB.
	MaxBodyBytes int64
	// BodyTimeout bounds reading a request body, from the start of its handler; past it the
	// request is answered 408 request_timeout and its connection closed. 0 → no bound here
	// (the server's own read deadlines, if any, still apply).
	BodyTimeout time.Duration
	// WriteTimeout ends the connection when one write of an answer makes no progress for
	// this long (a client that stopped reading); 0 → 30s. Per write, not per answer.
	WriteTimeout time.Duration
	// MaxHeaderBytes caps a request's line and headers together, as sent; a request over it
	// is answered 431 request_header_too_large and its connection closed. 0 → no cap here
	// (the server's own, which it applies before any handler runs, still does).
	MaxHeaderBytes int
	// APIKeys, when non-empty, are the keys clients must present (Authorization: Bearer or
	// x-api-key). AdminKeys guard /admin; when empty, /admin takes the API keys.
	APIKeys, AdminKeys []string
	// Clients are the config's client keys (SPEC §18), each naming its client and limits;
	// empty: the APIKeys, named key-1, key-2, … by position. Either one sets the other.
	Clients []ClientKey
	// Keys, when set, resolves the run-time client keys; nil: Tenants', else config keys only.
	Keys KeyResolver
	// Tenants, when set, keeps run-time keys, budgets and the spend ledger (SPEC §18) and
	// serves the /admin/keys and /admin/usage routes.
	Tenants Tenants
	// Origins, with no APIKeys, refuses on every route a request whose Host or Origin it does
	// not serve (403 forbidden_origin, SPEC §3), so that a web page cannot drive a gateway
	// that has no keys. Nil: no such check (app.New always sets one). With APIKeys it is not
	// consulted: a page cannot present a key it does not know.
	Origins *guard.Policy
	Logger  zerolog.Logger
	// Now is the clock; nil → time.Now.
	Now func() time.Time

	// Metrics serves GET /metrics; nil: no such route. It takes the admin keys (as /admin
	// does) unless MetricsPublic.
	Metrics       http.Handler
	MetricsPublic bool
	// Observe, when set, is called once for every answered model request, after its log
	// line, from the request's goroutine: it must not block.
	Observe func(Outcome)
	// Tracer, when set, traces every model request (trace.go); nil: no spans, and nothing
	// of a client's traceparent is read.
	Tracer trace.Tracer
	// TraceContent puts the request's messages on its span (gen_ai.input.messages); false
	// (the zero value) keeps prompts out of traces.
	TraceContent bool
	// Reload serves POST /admin/reload (admin keys): it re-reads the configuration and
	// returns the document to answer with. An error with a Problems() []string method is an
	// invalid file (400 invalid_config listing them); nil: no such route.
	Reload func(context.Context) (any, error)
}

// Server is the gateway's HTTP handler.
type Server struct {
	opts     Options
	router   *httprouter.Router
	unready  atomic.Bool  // set by Unready
	stopping atomic.Bool  // set by Stopping
	handler  http.Handler // the router behind the request id and the request limits
	unrouted seenRoutes   // unknown routes logged at info so far
	clients  clientRing   // the config's client keys
}

// New returns the handler with every route of SPEC §3 that exists so far.
func New(opts Options) *Server {
	opts = withDefaults(opts)
	s := &Server{opts: opts, router: httprouter.New(), clients: newClientRing(opts.Clients)}
	s.apiRoutes()
	s.adminRoutes()
	s.probeAndConsoleRoutes()
	r := s.router
	r.NotFound = s.loggedUnrouted(s.notFound)
	r.MethodNotAllowed = s.loggedUnrouted(s.methodNotAllowed)
	r.PanicHandler = func(w http.ResponseWriter, req *http.Request, v any) {
		s.opts.Logger.Error().Interface("panic", v).Str("request_id", requestID(req.Context())).Str("path", clip(req.URL.Path, 200)).Msg("handler panic")
		apiError{status: http.StatusInternalServerError, code: "internal_error", typ: "api_error",
			message: "internal error"}.write(w)
	}
	s.handler = s.withRequestID(s.limits(s.router))
	return s
}

// withDefaults fills the zero values Options documents, and derives the client keys from
// the plain key list (or the reverse) when only one is given.
func withDefaults(opts Options) Options {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 8 << 20
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 30 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if len(opts.Clients) == 0 {
		opts.Clients = clientsFromKeys(opts.APIKeys)
	}
	if len(opts.APIKeys) == 0 {
		for _, k := range opts.Clients {
			opts.APIKeys = append(opts.APIKeys, k.Secret)
		}
	}
	if opts.Keys == nil && opts.Tenants != nil {
		opts.Keys = opts.Tenants
	}
	return opts
}

// handle registers a route with its access log (access.go): one log line per answer.
func (s *Server) handle(method, path string, kind routeKind, h httprouter.Handle) {
	s.router.Handle(method, path, s.logged(path, kind, h))
}

// apiRoutes are the client-facing routes, behind the client keys.
func (s *Server) apiRoutes() {
	handle := s.handle
	handle("POST", chatAPI.route, routeModel, queueHeader(s.clientAuth(failOpenAI, s.serve(chatAPI))))
	handle("POST", responsesAPI.route, routeModel, queueHeader(s.clientAuth(failOpenAI, s.serve(responsesAPI))))
	handle("POST", embeddingsAPI.route, routeModel, queueHeader(s.clientAuth(failOpenAI, s.serve(embeddingsAPI))))
	handle("POST", completionsAPI.route, routeModel, queueHeader(s.clientAuth(failOpenAI, s.serve(completionsAPI))))
	handle("POST", messagesAPI.route, routeModel, anthropicID(queueHeader(s.clientAuth(failMessages, s.serve(messagesAPI)))))
	if bg, ok := s.opts.Gateway.(BatchGateway); ok {
		handle("POST", batchRoute, routeModel, queueHeader(s.clientAuth(failOpenAI, s.batch(bg))))
	}
	handle("POST", "/v1/messages/count_tokens", routeInfo, anthropicID(s.clientAuth(failMessages, s.countTokens)))
	handle("GET", "/v1/models", routeInfo, byClient(s.clientAuth(failOpenAI, s.listModels), s.clientAuth(failMessages, s.listModels)))
	handle("GET", "/v1/models/*id", routeInfo, byClient(s.clientAuth(failOpenAI, s.getModel), s.clientAuth(failMessages, s.getModel)))
}

// adminRoutes are the operator's routes, behind the admin keys (the client keys when no
// admin keys are configured); /metrics may be public.
func (s *Server) adminRoutes() {
	opts := s.opts
	admin := opts.AdminKeys
	if len(admin) == 0 {
		admin = opts.APIKeys
	}
	if opts.State != nil {
		s.handle("GET", "/admin/state", routeInfo, byClient(s.auth(admin, s.state), s.authAs(admin, failMessages, s.state)))
	}
	if opts.Reload != nil {
		s.handle("POST", "/admin/reload", routeInfo, byClient(s.auth(admin, s.reload), s.authAs(admin, failMessages, s.reload)))
	}
	if opts.Tenants != nil {
		s.adminKeyRoutes(s.handle, admin)
	}
	if opts.Metrics != nil {
		metricsKeys := admin
		if opts.MetricsPublic {
			metricsKeys = nil
		}
		s.handle("GET", "/metrics", routeProbe, s.auth(metricsKeys, func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
			opts.Metrics.ServeHTTP(w, r)
		}))
	}
}

// probeAndConsoleRoutes are the probes, the agents' connection check and the web console.
func (s *Server) probeAndConsoleRoutes() {
	s.handle("GET", "/healthz", routeProbe, s.healthz)
	s.handle("GET", "/readyz", routeProbe, s.readyz)
	// Claude Code's connection check before its first call: answered, and logged at debug.
	s.handle("HEAD", "/api/hello", routeProbe, s.hello)
	s.handle("GET", "/api/hello", routeProbe, s.hello)
	// The web console (SPEC §14) is static files calling the routes above; "/" leads to it
	// (and the router's trailing-slash redirect takes "/ui" there).
	console := ui.Handler(http.HandlerFunc(s.notFound))
	serveConsole := func(w http.ResponseWriter, req *http.Request, _ httprouter.Params) { console.ServeHTTP(w, req) }
	s.handle("GET", ui.Prefix+"*file", routeAsset, serveConsole)
	s.handle("HEAD", ui.Prefix+"*file", routeAsset, serveConsole)
	s.handle("GET", "/", routeAsset, func(w http.ResponseWriter, req *http.Request, _ httprouter.Params) {
		http.Redirect(w, req, ui.Prefix, http.StatusFound)
	})
}

// ServeHTTP tags the request with an id, applies the request limits (limits.go), then
// routes it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// hello answers a client's check that the gateway is there, with nothing more to say.
func (s *Server) hello(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	w.WriteHeader(http.StatusOK)
}

func (s *Server) state(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	writeJSON(w, http.StatusOK, s.opts.State())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
