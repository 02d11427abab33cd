// Package guard decides whether a request's Host and Origin headers are the gateway's own,
// so that a web page cannot drive a gateway that has no keys (SPEC §3): a page on another
// origin posting to it (a CORS "simple" request needs no preflight), or reading its answers
// through DNS rebinding (the page's own name made to resolve to the gateway's address).
//
// The Host check defeats rebinding: a rebound page's requests carry the page's name, never
// localhost, an address of the gateway or a name the operator allowed. The Origin check
// defeats cross-origin posts: a browser names the page's origin on every cross-origin
// request but a plain navigation, and on every same-origin one but a GET or HEAD; a request
// without an Origin (curl, the SDKs, a same-origin GET) is not a page's cross-origin call.
package guard

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Policy is the set of Host and Origin values a gateway serves. Its zero value is not
// usable; build one with New.
type Policy struct {
	listen   string // as configured, for messages
	wildcard bool   // listen is every address of the machine (0.0.0.0, [::], or no host)
	own      host   // listen's host when it is not a wildcard
	anyHost  bool   // allowed_hosts has "*"
	hosts    []host
	suffixes []string // allowed_hosts' "*.name" entries, as ".name"
	origins  map[string]bool

	// Addrs lists the machine's addresses, for a wildcard listen; New sets net.InterfaceAddrs.
	// A test replaces it before the first Check.
	Addrs func() ([]net.Addr, error)
	mu    sync.Mutex
	seen  map[netip.Addr]bool // the machine's addresses as last read
	read  time.Time           // when seen was read; zero: never
}

// reread is how often, at most, the machine's addresses are read again when a request names
// an address not among those read last (an interface that came up since).
const reread = time.Second

// New returns the policy for a gateway listening on listen (host:port) that also serves the
// allowed_hosts hosts and the allowed_origins origins. Entries are checked with ParseHost and
// ParseOrigin; the first bad one is the error.
func New(listen string, hosts, origins []string) (*Policy, error) {
	lh, _, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("listen %q: %w", listen, err)
	}
	p := &Policy{listen: listen, origins: map[string]bool{}, Addrs: net.InterfaceAddrs}
	p.own = parseHost(lh)
	p.wildcard = lh == "" || (p.own.ip.IsValid() && p.own.ip.IsUnspecified())
	for i, h := range hosts {
		n, err := ParseHost(h)
		if err != nil {
			return nil, fmt.Errorf("allowed_hosts[%d]: %w", i, err)
		}
		switch {
		case n == "*":
			p.anyHost = true
		case strings.HasPrefix(n, "*."):
			p.suffixes = append(p.suffixes, n[1:])
		default:
			p.hosts = append(p.hosts, parseHost(n))
		}
	}
	for i, o := range origins {
		n, err := ParseOrigin(o)
		if err != nil {
			return nil, fmt.Errorf("allowed_origins[%d]: %w", i, err)
		}
		p.origins[n] = true
	}
	return p, nil
}

// Refusal is a request whose Host or Origin the policy does not serve.
type Refusal struct {
	Header string // "Host" or "Origin"
	Value  string // as the request sent it
	why    string
}

func (r *Refusal) Error() string { return r.why }

// Check returns nil when a request with this Host header (http.Request.Host) and these
// Origin header values is served, else a *Refusal that says which header was refused and how
// to allow it. An empty Host (HTTP/1.0 without one) is served: a browser always sends one.
func (p *Policy) Check(hostHeader string, origins []string) error {
	h := parseHost(hostHeader)
	if hostHeader != "" && !p.hostServed(h) {
		return &Refusal{Header: "Host", Value: hostHeader, why: fmt.Sprintf(
			"the Host header %q is not this gateway's: with no api keys configured, only localhost, "+
				"the listen address (%s) and auth.allowed_hosts are served, so that a web page cannot "+
				"reach the gateway by DNS rebinding; add the name to auth.allowed_hosts, or configure auth.api_keys",
			shown(hostHeader), p.listenDesc())}
	}
	switch len(origins) {
	case 0:
		return nil
	case 1:
		if p.originServed(origins[0], h) {
			return nil
		}
	}
	return &Refusal{Header: "Origin", Value: strings.Join(origins, ", "), why: fmt.Sprintf(
		"the Origin header %q is not this gateway's own: with no api keys configured, a web page on "+
			"another origin may not call the gateway (its console at /ui/ is served on the gateway's "+
			"own origin); add the origin to auth.allowed_origins, or configure auth.api_keys",
		shown(strings.Join(origins, ", ")))}
}

// shown is a header value as a message quotes it: its first 200 bytes.
func shown(v string) string {
	if len(v) > 200 {
		return v[:200] + "…"
	}
	return v
}

func (p *Policy) listenDesc() string {
	if p.wildcard {
		return p.listen + ", any address of this machine"
	}
	return p.listen
}

// hostServed reports whether a request's parsed Host names this gateway; the port is not
// looked at (a port forward or a proxy in front changes it, and rebinding cannot pick a
// name by its port).
func (p *Policy) hostServed(h host) bool {
	switch {
	case h.name == "" && !h.ip.IsValid():
		return false // not a host at all
	case p.anyHost || h.loopback():
		return true
	case !p.wildcard && h.same(p.own):
		return true
	}
	for _, a := range p.hosts {
		if h.same(a) {
			return true
		}
	}
	for _, s := range p.suffixes {
		if strings.HasSuffix(h.name, s) {
			return true
		}
	}
	return p.wildcard && h.ip.IsValid() && p.machineHas(h.ip)
}

// machineHas reports whether ip is one of the machine's addresses, reading them again when it
// is not among those read last and they were read more than reread ago.
func (p *Policy) machineHas(ip netip.Addr) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.seen[ip] {
		return true
	}
	if !p.read.IsZero() && time.Since(p.read) < reread {
		return false
	}
	p.read = time.Now()
	addrs, err := p.Addrs()
	if err != nil {
		return false // served as a foreign address; the next miss reads again
	}
	p.seen = map[netip.Addr]bool{}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				p.seen[ip.Unmap()] = true
			}
		}
	}
	return p.seen[ip]
}

// originServed reports whether an Origin header value is the gateway's own origin (the one
// the request's Host names: the console's) or an allowed one.
func (p *Policy) originServed(value string, h host) bool {
	n, err := ParseOrigin(value)
	if err != nil {
		return false // "null" (a sandboxed or file: page) and anything malformed
	}
	if p.origins[n] {
		return true
	}
	u, _ := url.Parse(n) // n is normalized: it parses
	oh := parseHost(u.Hostname())
	if !oh.same(h) {
		return false
	}
	port := u.Port()
	if port == "" {
		port = defaultPorts[u.Scheme]
	}
	hp := h.port
	if hp == "" {
		hp = defaultPorts[u.Scheme]
	}
	return port == hp
}
