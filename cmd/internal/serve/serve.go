// Package serve runs the gateway's HTTP server with the limits a client meets before any
// handler runs: how long its request line and headers may take and how large they may be,
// how long an idle keep-alive connection stays open, and how many connections one client
// address may hold. Go's server enforces the first three by closing the connection without
// a word; this package puts a line in the log for every connection one of them closed
// (conn.go), and adds the per-client cap (listener.go).
package serve

import (
	"context"
	stdlog "log"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// Limits bound what one client may make the server hold. Zero values: no header timeout,
// no idle timeout, Go's default header cap (1 MiB) and no per-client cap; the config package
// owns the gateway's defaults.
type Limits struct {
	// HeaderTimeout bounds the time from a connection's first byte (or its last answer) to
	// the end of the request's headers.
	HeaderTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that waits this long for its next request.
	IdleTimeout time.Duration
	// MaxHeaderBytes caps the request line and headers Go's server reads before it refuses
	// them with 431 (it reads up to 4 KiB more than this before deciding).
	MaxHeaderBytes int
	// MaxConnsPerClient caps the connections open at once from one client IP address; a
	// connection over it is closed as soon as it is accepted. 0: no cap.
	MaxConnsPerClient int
}

// Server is an http.Server whose connections are tracked for the per-client cap and for
// the log. Its methods are safe for concurrent use.
type Server struct {
	http   *http.Server
	limits Limits
	// log receives the connection-level lines, at most connLogBurst a second of each level
	// (connLog): a flood of refused connections must not become a flood of log lines.
	log zerolog.Logger

	mu      sync.Mutex
	clients map[string]int // open connections per client address, when capped

	handlers running // the requests inside the handler, for Wait
}

// running counts the requests inside the handler, so Wait can tell when the last returned.
type running struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n falls to 0; a new one each time n leaves 0
}

func (r *running) enter() {
	r.mu.Lock()
	if r.n == 0 {
		r.idle = make(chan struct{})
	}
	r.n++
	r.mu.Unlock()
}

func (r *running) leave() {
	r.mu.Lock()
	r.n--
	if r.n == 0 {
		close(r.idle)
	}
	r.mu.Unlock()
}

// wait returns nil once no request is inside the handler, or ctx's error if it ends first.
func (r *running) wait(ctx context.Context) error {
	r.mu.Lock()
	if r.n == 0 {
		r.mu.Unlock()
		return nil
	}
	idle := r.idle
	r.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// connLogBurst is how many connection-level lines of one level a second the log gets; the
// rest of a second's lines of that level are dropped.
const connLogBurst = 20

// connLog caps log's lines at connLogBurst a second for each level apart, so that a flood of
// one kind, such as kept-alive connections closing at idle_timeout (debug), cannot crowd out
// the lines of another, such as a request late past header_timeout (info).
func connLog(log zerolog.Logger) zerolog.Logger {
	burst := func() zerolog.Sampler { return &zerolog.BurstSampler{Burst: connLogBurst, Period: time.Second} }
	return log.Sample(zerolog.LevelSampler{TraceSampler: burst(), DebugSampler: burst(),
		InfoSampler: burst(), WarnSampler: burst(), ErrorSampler: burst()})
}

// New returns a Server for handler with the limits; its connection-level lines go to log.
func New(handler http.Handler, l Limits, log zerolog.Logger) *Server {
	s := &Server{limits: l, clients: map[string]int{},
		log: connLog(log)}
	s.http = &http.Server{
		Handler:           s.mark(handler),
		ReadHeaderTimeout: l.HeaderTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
		ConnState:         s.connState,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
		// What Go's server would print on stderr (accept errors, a panicking handler) goes
		// to the log instead.
		ErrorLog: stdlog.New(log.With().Str("component", "http").Logger(), "", 0),
	}
	return s
}

// Serve accepts connections on ln until Shutdown or Close, and returns
// http.ErrServerClosed then; see http.Server.Serve.
func (s *Server) Serve(ln net.Listener) error {
	return s.http.Serve(&listener{Listener: ln, s: s})
}

// Shutdown stops accepting, closes idle connections and waits for active ones to go idle
// or ctx to end; see http.Server.Shutdown.
func (s *Server) Shutdown(ctx context.Context) error { return s.http.Shutdown(ctx) }

// Close closes the listeners and every connection at once; see http.Server.Close. It does
// not wait for the handlers: one blocked writing returns once its write fails (Wait).
func (s *Server) Close() error { return s.http.Close() }

// Wait returns once every request that reached the handler has returned from it (and so
// written its log line), or with ctx's error when ctx ends first. After Close, a handler
// still blocked writing to a closed connection returns at once; a process that exits
// without Wait may lose what those handlers had still to do.
func (s *Server) Wait(ctx context.Context) error { return s.handlers.wait(ctx) }

type connKey struct{}

// mark notes on a request's connection that the request reached the handler, so what the
// connection writes from then on is the handler's answer, not Go's own refusal (conn.Write).
func (s *Server) mark(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := r.Context().Value(connKey{}).(*conn); ok {
			c.reached.Store(true)
		}
		s.handlers.enter()
		defer s.handlers.leave()
		next.ServeHTTP(w, r)
	})
}
