package guard

import (
	"errors"
	"net"
	"strings"
	"testing"
)

// machine is the address list a wildcard listen sees in these tests.
func machine() ([]net.Addr, error) {
	return []net.Addr{
		&net.IPNet{IP: net.ParseIP("10.1.2.3"), Mask: net.CIDRMask(24, 32)},
		&net.IPNet{IP: net.ParseIP("fd00::7"), Mask: net.CIDRMask(64, 128)},
	}, nil
}

func TestCheck(t *testing.T) {
	hosts := []string{"gw.example.com", "*.svc.cluster.local", "192.168.9.9"}
	origins := []string{"https://app.example.com", "http://localhost:3000"}
	cases := []struct {
		name, listen, host string
		origin             []string
		refused            string // "", "Host" or "Origin"
	}{
		{"loopback v4 with port", "127.0.0.1:8080", "127.0.0.1:8080", nil, ""},
		{"another loopback v4, another port", "127.0.0.1:8080", "127.9.8.7:1", nil, ""},
		{"loopback v6", "127.0.0.1:8080", "[::1]:8080", nil, ""},
		{"loopback v6 no port", "127.0.0.1:8080", "[::1]", nil, ""},
		{"loopback v4 in v6", "127.0.0.1:8080", "[::ffff:127.0.0.1]:8080", nil, ""},
		{"localhost", "127.0.0.1:8080", "localhost", nil, ""},
		{"LOCALHOST. with port", "127.0.0.1:8080", "LocalHost.:8080", nil, ""},
		{"a name under .localhost", "127.0.0.1:8080", "console.localhost:8080", nil, ""},
		{"no Host (HTTP/1.0)", "127.0.0.1:8080", "", nil, ""},
		{"a rebound name", "127.0.0.1:8080", "evil.example:8080", nil, "Host"},
		{"a rebound name, same origin", "127.0.0.1:8080", "evil.example:8080", []string{"http://evil.example:8080"}, "Host"},
		{"localhost as a prefix", "127.0.0.1:8080", "localhost.evil.example", nil, "Host"},
		{"localhost as a suffix", "127.0.0.1:8080", "evillocalhost", nil, "Host"},
		{"not a host", "127.0.0.1:8080", "a b", nil, "Host"},
		{"the listen address", "10.0.0.5:8080", "10.0.0.5:9999", nil, ""},
		{"the listen name", "gw.lan:8080", "GW.lan", nil, ""},
		{"another address of a specific listen", "10.0.0.5:8080", "10.1.2.3:8080", nil, "Host"},
		{"wildcard: a machine address", "0.0.0.0:8080", "10.1.2.3:8080", nil, ""},
		{"wildcard v6: a machine address", "[::]:8080", "[fd00::7]:8080", nil, ""},
		{"no host listen: a machine address", ":8080", "10.1.2.3", nil, ""},
		{"wildcard: not a machine address", "0.0.0.0:8080", "10.1.2.4:8080", nil, "Host"},
		{"wildcard: a name", "0.0.0.0:8080", "evil.example", nil, "Host"},
		{"allowed name", "127.0.0.1:8080", "GW.example.com:443", nil, ""},
		{"allowed wildcard", "0.0.0.0:8080", "tollgate.default.svc.cluster.local:8080", nil, ""},
		{"wildcard is not its own domain", "0.0.0.0:8080", "svc.cluster.local", nil, "Host"},
		{"allowed address", "127.0.0.1:8080", "192.168.9.9:80", nil, ""},
		{"own origin", "127.0.0.1:8080", "127.0.0.1:8080", []string{"http://127.0.0.1:8080"}, ""},
		{"own origin, https behind a proxy", "127.0.0.1:8080", "gw.example.com", []string{"https://gw.example.com"}, ""},
		{"own origin, default port", "127.0.0.1:8080", "localhost", []string{"http://localhost:80"}, ""},
		{"another loopback port", "127.0.0.1:8080", "127.0.0.1:8080", []string{"http://127.0.0.1:8081"}, "Origin"},
		{"another loopback name", "127.0.0.1:8080", "127.0.0.1:8080", []string{"http://localhost:8080"}, "Origin"},
		{"a foreign page", "127.0.0.1:8080", "127.0.0.1:8080", []string{"https://evil.example"}, "Origin"},
		{"null origin", "127.0.0.1:8080", "127.0.0.1:8080", []string{"null"}, "Origin"},
		{"malformed origin", "127.0.0.1:8080", "127.0.0.1:8080", []string{"127.0.0.1:8080"}, "Origin"},
		{"two origins", "127.0.0.1:8080", "127.0.0.1:8080", []string{"http://127.0.0.1:8080", "http://127.0.0.1:8080"}, "Origin"},
		{"allowed origin", "127.0.0.1:8080", "127.0.0.1:8080", []string{"HTTPS://App.Example.com:443"}, ""},
		{"allowed origin, its port", "127.0.0.1:8080", "localhost:8080", []string{"http://localhost:3000"}, ""},
		{"allowed origin, another port", "127.0.0.1:8080", "localhost:8080", []string{"http://localhost:3001"}, "Origin"},
		{"allowed origin, another scheme", "127.0.0.1:8080", "localhost:8080", []string{"http://app.example.com"}, "Origin"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := New(c.listen, hosts, origins)
			if err != nil {
				t.Fatal(err)
			}
			p.Addrs = machine
			err = p.Check(c.host, c.origin)
			var r *Refusal
			switch {
			case c.refused == "" && err != nil:
				t.Fatalf("Check(%q, %q) = %v, want served", c.host, c.origin, err)
			case c.refused == "":
				return
			case !errors.As(err, &r):
				t.Fatalf("Check(%q, %q) = %v, want a %s refusal", c.host, c.origin, err, c.refused)
			case r.Header != c.refused:
				t.Fatalf("refused %s, want %s: %v", r.Header, c.refused, err)
			}
			hint := map[string]string{"Host": "auth.allowed_hosts", "Origin": "auth.allowed_origins"}[c.refused]
			if msg := err.Error(); !strings.Contains(msg, hint) || !strings.Contains(msg, c.refused+" header") {
				t.Errorf("message %q names neither the %s header nor %s", msg, c.refused, hint)
			}
		})
	}
}

// TestAnyHost: "*" in allowed_hosts serves every Host, and leaves the Origin check on.
func TestAnyHost(t *testing.T) {
	p, err := New("127.0.0.1:8080", []string{"*"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Check("evil.example", nil); err != nil {
		t.Errorf("Host with *: %v", err)
	}
	if err := p.Check("evil.example", []string{"http://other.example"}); err == nil {
		t.Error("a foreign Origin was served with allowed_hosts *")
	}
}

// TestMachineAddrsReread: an address that appears after the first read is served once the
// list is read again, and a failing read serves nothing but the fixed names.
func TestMachineAddrsReread(t *testing.T) {
	p, err := New("0.0.0.0:8080", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.Addrs = func() ([]net.Addr, error) { return nil, errors.New("no netlink") }
	if p.Check("10.1.2.3", nil) == nil {
		t.Fatal("served an address while the machine's could not be read")
	}
	if err := p.Check("localhost:8080", nil); err != nil {
		t.Fatalf("localhost: %v", err)
	}
	p.Addrs = machine
	p.read = p.read.Add(-2 * reread)
	if err := p.Check("10.1.2.3", nil); err != nil {
		t.Fatalf("after a reread: %v", err)
	}
}

func TestParseHost(t *testing.T) {
	cases := []struct{ in, want, err string }{
		{"gw.example.com", "gw.example.com", ""},
		{"GW.Example.COM.", "gw.example.com", ""},
		{"*.svc.cluster.local", "*.svc.cluster.local", ""},
		{"*", "*", ""},
		{"10.0.0.5", "10.0.0.5", ""},
		{"[::1]", "::1", ""},
		{"::ffff:10.0.0.5", "10.0.0.5", ""},
		{"", "", "empty host"},
		{"gw.example.com:8080", "", "without a port"},
		{"[::1]:8080", "", "without a port"},
		{"http://gw.example.com", "", "no scheme"},
		{"gw.example.com/ui", "", "no scheme"},
		{"*.com", "", "two labels"},
		{"a.*.com", "", "not a host name"},
		{"gw..example", "", "not a host name"},
		{"fe80::1%eth0", "", "zone"},
	}
	for _, c := range cases {
		got, err := ParseHost(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseHost(%q) = %q, %v; want an error with %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseHost(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func TestParseOrigin(t *testing.T) {
	cases := []struct{ in, want, err string }{
		{"https://app.example.com", "https://app.example.com", ""},
		{"HTTPS://App.Example.com:443", "https://app.example.com", ""},
		{"http://localhost:3000/", "http://localhost:3000", ""},
		{"http://[::1]:80", "http://[::1]", ""},
		{"chrome-extension://abcdef", "chrome-extension://abcdef", ""},
		{"", "", "empty origin"},
		{"null", "", "sandboxed"},
		{"*", "", "every web page"},
		{"app.example.com", "", "scheme://host"},
		{"https://app.example.com/path", "", "no user, path"},
		{"https://u@app.example.com", "", "no user, path"},
		{"https://app.example.com?q", "", "no user, path"},
		{"https://app.example.com:x", "", "not an origin"},
		{"https://a b", "", "not an origin"},
	}
	for _, c := range cases {
		got, err := ParseOrigin(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseOrigin(%q) = %q, %v; want an error with %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseOrigin(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func TestNewNamesTheBadEntry(t *testing.T) {
	if _, err := New("127.0.0.1:8080", []string{"ok.example", "bad:1"}, nil); err == nil || !strings.HasPrefix(err.Error(), "allowed_hosts[1]: ") {
		t.Errorf("bad host: %v", err)
	}
	if _, err := New("127.0.0.1:8080", nil, []string{"null"}); err == nil || !strings.HasPrefix(err.Error(), "allowed_origins[0]: ") {
		t.Errorf("bad origin: %v", err)
	}
	if _, err := New("nowhere", nil, nil); err == nil {
		t.Error("a listen without a port was accepted")
	}
}
