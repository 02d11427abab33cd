package httpapi

import (
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/julienschmidt/httprouter"
	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/providers/llm"
)

// Outcome is one answered model request (a chat completion) as the HTTP layer saw it, for
// Options.Observe. It holds what the request's log line says that metrics may count: never a
// key, a request id or a prompt, and only ids of configured models, so every value is from
// a bounded set.
type Outcome struct {
	Route string // the route pattern, e.g. "/v1/chat/completions"
	// Model is the id ("provider/model") of the model that served or refused the request, and
	// Provider its provider; both "" when none was chosen (an invalid body, an unknown model
	// id, a refused API key).
	Model, Provider string
	Status          int    // HTTP status; 499 when the client left before the answer ended
	Code            string // the SPEC §4 code; "" on success and for a client that left
	// Attempts counts backend calls: 0 when the gateway turned the request away before any.
	Attempts  int
	QueueWait time.Duration
	TTFB      time.Duration // until the first byte of the answer; 0 when none was sent
	Duration  time.Duration
	Usage     llm.Usage
	// Client is the client key's name ("" for the anonymous client) and CostUSD the call's
	// cost from its model's price (0 without a ledger).
	Client  string
	CostUSD float64
}

// statusWriter remembers what a handler answered, for the access log. Flushes go straight to
// the connection (FlushError, so http.ResponseController sees a client that left), and
// Unwrap lets a ResponseController reach the connection's other controls.
type statusWriter struct {
	http.ResponseWriter
	status int
	code   string // the SPEC §4 code of an error answer, set by apiError.write
	own    bool   // the handler writes the request's log line itself (claimLog)
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) FlushError() error {
	switch f := w.ResponseWriter.(type) {
	case interface{ FlushError() error }:
		return f.FlushError()
	case http.Flusher:
		f.Flush()
		return nil
	}
	return http.ErrNotSupported
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// claimLog tells the access log that the handler writes the request's log line (and
// observes its Outcome) itself, with more to say than a status.
func claimLog(w http.ResponseWriter) {
	if sw, ok := w.(*statusWriter); ok {
		sw.own = true
	}
}

// noteCode records the SPEC §4 code of an error answer for the access log.
func noteCode(w http.ResponseWriter, code string) {
	if sw, ok := w.(*statusWriter); ok {
		sw.code = code
	}
}

// routeKind says how a route's requests are logged.
type routeKind int

const (
	routeInfo   routeKind = iota // logged at info
	routeProbe                   // health probes and scrapes: logged at debug, they come every few seconds
	routeModel                   // a model request: its handler logs it; a refusal before it (auth) is observed too
	routeAsset                   // the console's files: logged at debug, a page load fetches a dozen
	routeRepeat                  // an unknown route logged before: at debug, its first line said it all
)

// logged wraps a route's handler with its access log line, written once the answer is done
// unless the handler claimed it. route is the pattern, never the raw path.
func (s *Server) logged(route string, kind routeKind, h httprouter.Handle) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		start := s.opts.Now()
		sw := &statusWriter{ResponseWriter: w}
		h(sw, r, ps)
		if !sw.own {
			s.answered(r, route, kind, sw, start)
		}
	}
}

// answered logs and observes the answer sw of a request that started at start. It is apart
// from logged's handler, whose frame stays below every call on the HTTP server's connection
// goroutine (docs/benchmarks.md).
func (s *Server) answered(r *http.Request, route string, kind routeKind, sw *statusWriter, start time.Time) {
	s.access(r, route, kind, sw, start)
	if kind == routeModel && s.opts.Observe != nil {
		s.opts.Observe(Outcome{Route: route, Status: sw.status, Code: sw.code, Duration: s.opts.Now().Sub(start)})
	}
}

// loggedUnrouted is logged for requests no route matched (404, 405); their path is logged,
// without its query, where keys sometimes hide. Each method and path is logged at info
// once, then at debug: a misconfigured client repeats its request.
func (s *Server) loggedUnrouted(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := s.opts.Now()
		sw := &statusWriter{ResponseWriter: w}
		h(sw, r)
		kind := routeInfo
		if !s.unrouted.first(r.Method + " " + clip(r.URL.Path, 200)) {
			kind = routeRepeat
		}
		s.access(r, "", kind, sw, start)
	})
}

// access writes the log line of a request its handler did not log itself.
func (s *Server) access(r *http.Request, route string, kind routeKind, sw *statusWriter, start time.Time) {
	status := sw.status
	if status == 0 {
		status = http.StatusOK
	}
	var ev *zerolog.Event
	switch {
	case kind == routeRepeat:
		ev = s.opts.Logger.Debug()
	case status >= 500:
		ev = s.opts.Logger.Warn()
	case (kind == routeProbe || kind == routeAsset) && status < 400:
		ev = s.opts.Logger.Debug()
	default:
		ev = s.opts.Logger.Info()
	}
	ev = ev.Str("request_id", requestID(r.Context())).Str("method", r.Method)
	if route != "" {
		ev = ev.Str("route", route)
	} else {
		ev = ev.Str("path", clip(r.URL.Path, 200))
	}
	ev.Int("status", status).Str("code", sw.code).Int64("duration_ms", s.opts.Now().Sub(start).Milliseconds()).Msg("http")
}

// clip cuts s to at most n bytes, at a character boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
