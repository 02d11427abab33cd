package guard

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
)

// host is a Host header or a listen host, normalized: an IP address (zone and IPv4-in-IPv6
// mapping dropped), or else a lower-case name without a trailing dot; port as sent, or "".
type host struct {
	ip   netip.Addr
	name string
	port string
}

// parseHost reads "name", "name:port", "1.2.3.4[:port]", "[::1][:port]" or a bare "::1".
// What is neither an address nor a plausible name has neither set.
func parseHost(s string) host {
	var h host
	if hp, port, err := net.SplitHostPort(s); err == nil {
		s, h.port = hp, port
	} else {
		s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	}
	if ip, err := netip.ParseAddr(s); err == nil {
		h.ip = ip.WithZone("").Unmap()
		return h
	}
	name := strings.TrimSuffix(strings.ToLower(s), ".")
	if validName(name) {
		h.name = name
	}
	return h
}

// loopback reports a host that can only be this machine: a loopback address, localhost or a
// name under .localhost (RFC 6761 §6.3).
func (h host) loopback() bool {
	if h.ip.IsValid() {
		return h.ip.IsLoopback()
	}
	return h.name == "localhost" || strings.HasSuffix(h.name, ".localhost")
}

// same reports whether h and o name the same host, ports aside.
func (h host) same(o host) bool {
	if h.ip.IsValid() || o.ip.IsValid() {
		return h.ip == o.ip
	}
	return h.name != "" && h.name == o.name
}

// validName reports a DNS-style name: dot-separated labels of letters, digits, '-' and '_'.
func validName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	label := 0 // the current label's length so far
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '.':
			if label == 0 {
				return false
			}
			label = 0
		case c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_':
			if label++; label > 63 {
				return false
			}
		default:
			return false
		}
	}
	return label > 0
}

// ParseHost checks one allowed_hosts entry and returns it normalized: a host name
// ("gateway.example.com", matched without regard to case), "*.example.com" (every name under
// example.com, not example.com itself), an IP address ("10.0.0.5", "::1" or "[::1]"), or "*"
// (every Host: the check is off; only for a gateway behind something that checks Host). Ports
// are not part of an entry: any port is served.
func ParseHost(s string) (string, error) {
	switch {
	case s == "*":
		return s, nil
	case s == "":
		return "", errors.New("empty host (an unset variable?); remove the entry if you meant none")
	case strings.Contains(s, "://") || strings.ContainsAny(s, "/?#@ "):
		return "", fmt.Errorf("%q is not a host name: give the name alone, e.g. gateway.example.com (no scheme, path or port)", s)
	}
	bare := strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	if ip, err := netip.ParseAddr(bare); err == nil {
		if ip.Zone() != "" {
			return "", fmt.Errorf("%q: an address with a zone is not accepted; give the address alone", s)
		}
		return ip.Unmap().String(), nil
	}
	if strings.Contains(s, ":") {
		return "", fmt.Errorf("%q: give the host without a port (any port is served)", s)
	}
	name := strings.TrimSuffix(strings.ToLower(s), ".")
	rest, wild := strings.CutPrefix(name, "*.")
	if !validName(rest) {
		return "", fmt.Errorf("%q is not a host name (letters, digits, '-', '_' and dots; '*.' only as the first label)", s)
	}
	if wild && !strings.Contains(rest, ".") {
		return "", fmt.Errorf("%q: a wildcard needs a domain of two labels or more, e.g. *.example.com", s)
	}
	return name, nil
}

// defaultPorts are the ports an origin without one has.
var defaultPorts = map[string]string{"http": "80", "https": "443"}

// ParseOrigin checks an origin (an allowed_origins entry, or a request's Origin header) and
// returns it normalized as a browser sends it: scheme://host[:port], lower case, without the
// scheme's default port. "null" (the origin of sandboxed and file: pages, which any page can
// take on) and "*" are refused: each origin is listed by name.
func ParseOrigin(s string) (string, error) {
	switch s {
	case "":
		return "", errors.New("empty origin (an unset variable?); remove the entry if you meant none")
	case "null":
		return "", errors.New(`"null" is the origin of sandboxed frames and local files, which any web page can take on; it cannot be allowed`)
	case "*":
		return "", errors.New(`"*" would let every web page drive the gateway; list each origin, or configure auth.api_keys`)
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "", fmt.Errorf("%q is not an origin: %w", s, err)
	case u.Scheme == "" || u.Host == "" || u.Opaque != "":
		return "", fmt.Errorf("%q is not an origin: write scheme://host[:port], e.g. https://app.example.com", s)
	case u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return "", fmt.Errorf("%q is not an origin: an origin is scheme://host[:port] only (no user, path, query or fragment)", s)
	}
	h := parseHost(u.Host)
	if !h.ip.IsValid() && h.name == "" {
		return "", fmt.Errorf("%q is not an origin: bad host %q", s, u.Hostname())
	}
	scheme := strings.ToLower(u.Scheme)
	hostport := h.name
	if h.ip.IsValid() {
		hostport = h.ip.String()
		if h.ip.Is6() {
			hostport = "[" + hostport + "]"
		}
	}
	if h.port != "" && h.port != defaultPorts[scheme] {
		hostport += ":" + h.port
	}
	return scheme + "://" + hostport, nil
}
