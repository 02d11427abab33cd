package serve

import (
	"bytes"
	"errors"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
)

// conn is a connection as the server sees it, watched so that when it closes the log can
// say which limit closed it: Go's server closes a connection whose headers are late, that
// sat idle too long, or whose request it refused itself (431, 400 for a malformed request),
// without any trace.
type conn struct {
	net.Conn
	s       *Server
	client  string // the address the per-client cap counts by
	counted bool   // the connection holds a place under its client's cap

	state    atomic.Int32           // the last http.ConnState the server reported
	reached  atomic.Bool            // the current request reached the handler
	timedOut atomic.Bool            // a read ended at its deadline since the last answer
	refusal  atomic.Pointer[string] // the status Go's server refused the request with, if it did
	once     sync.Once
}

func (c *conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		c.timedOut.Store(true)
	}
	return n, err
}

// Write notes the status line of what the server writes for a request that never reached the
// handler: that is Go's own refusal ("HTTP/1.1 431 Request Header Fields Too Large"). Only
// the status line is kept: the text after it may quote the client's headers, keys included.
func (c *conn) Write(p []byte) (int, error) {
	if http.ConnState(c.state.Load()) == http.StateActive && !c.reached.Load() && c.refusal.Load() == nil {
		line, _, _ := bytes.Cut(p[:min(len(p), 100)], []byte("\r\n"))
		status := string(bytes.TrimPrefix(line, []byte("HTTP/1.1 ")))
		c.refusal.Store(&status)
	}
	return c.Conn.Write(p)
}

// Close closes the connection and gives back its place under the client's cap, once.
func (c *conn) Close() error {
	c.once.Do(func() {
		if c.counted {
			c.s.release(c)
		}
	})
	return c.Conn.Close()
}

// CloseWrite half-closes the connection when the underlying one can, as Go's server does
// before it closes a connection it answered with an error, so the client reads the answer.
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// connState is the server's ConnState hook: it keeps each connection's state and, when one
// closes, logs the limit that closed it, if one did.
func (s *Server) connState(nc net.Conn, st http.ConnState) {
	c, ok := nc.(*conn)
	if !ok {
		return
	}
	switch st {
	case http.StateIdle: // an answer went out: what follows belongs to the next request
		c.reached.Store(false)
		c.timedOut.Store(false)
	case http.StateClosed:
		s.logClose(c, http.ConnState(c.state.Load()))
	}
	c.state.Store(int32(st))
}

// logClose says why the server closed c, when a limit did; last is its state before.
func (s *Server) logClose(c *conn, last http.ConnState) {
	remote := c.RemoteAddr().String()
	switch {
	case c.refusal.Load() != nil:
		s.log.Info().Str("remote", remote).Str("status", *c.refusal.Load()).
			Msg("connection closed: the server refused its request before routing it")
	case !c.timedOut.Load():
		// closed by the client, by a handler's answer, or by a shutdown: nothing to report
	case last == http.StateIdle:
		s.log.Debug().Str("remote", remote).Dur("idle_timeout", s.limits.IdleTimeout).
			Msg("connection closed: idle past idle_timeout")
	case last == http.StateNew || !c.reached.Load():
		s.log.Info().Str("remote", remote).Dur("header_timeout", s.limits.HeaderTimeout).
			Msg("connection closed: its request did not arrive within header_timeout")
	}
}
