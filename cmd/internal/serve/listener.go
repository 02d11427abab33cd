package serve

import (
	"net"
)

// listener wraps the server's listener: every connection it hands the server is a *conn,
// and one from a client address that already holds MaxConnsPerClient is closed instead.
type listener struct {
	net.Listener
	s *Server
}

// Accept returns the next connection the cap admits. Refused ones are closed here and never
// reach the server, which would otherwise read a request from them first.
func (l *listener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if c := l.s.admit(nc); c != nil {
			return c, nil
		}
	}
}

// admit counts nc against its client's cap and returns it tracked, or closes it and returns
// nil when the client is at the cap.
func (s *Server) admit(nc net.Conn) *conn {
	c := &conn{Conn: nc, s: s, client: clientAddr(nc.RemoteAddr())}
	max := s.limits.MaxConnsPerClient
	if max <= 0 {
		return c
	}
	s.mu.Lock()
	n := s.clients[c.client]
	if n < max {
		s.clients[c.client] = n + 1
	}
	s.mu.Unlock()
	if n < max {
		c.counted = true
		return c
	}
	_ = nc.Close()
	s.log.Warn().Str("remote", nc.RemoteAddr().String()).Int("max_conns_per_client", max).
		Msg("connection refused: the client already holds max_conns_per_client connections")
	return nil
}

// release gives back c's place under its client's cap.
func (s *Server) release(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.clients[c.client]--; s.clients[c.client] <= 0 {
		delete(s.clients, c.client)
	}
}

// clientAddr is the address the cap counts by: the IP without the port.
func clientAddr(a net.Addr) string {
	if host, _, err := net.SplitHostPort(a.String()); err == nil {
		return host
	}
	return a.String()
}
