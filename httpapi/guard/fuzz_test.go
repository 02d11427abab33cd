package guard

import "testing"

// FuzzParseOrigin: a normalized origin parses to itself, and Check never panics on any Host
// and Origin; an origin it serves for a Host is that Host's own or an allowed one.
func FuzzParseOrigin(f *testing.F) {
	for _, s := range []string{"http://127.0.0.1:8080", "https://App.Example.com:443/", "http://[::1]", "null", "a:b", "http://x:1/y"} {
		f.Add(s, "127.0.0.1:8080")
	}
	p, err := New("127.0.0.1:8080", []string{"*.example.com"}, []string{"https://app.example.com"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, origin, hostHeader string) {
		if n, err := ParseOrigin(origin); err == nil {
			again, err := ParseOrigin(n)
			if err != nil || again != n {
				t.Fatalf("ParseOrigin(%q) = %q, which parses to %q, %v", origin, n, again, err)
			}
		}
		_ = p.Check(hostHeader, []string{origin})
	})
}

// FuzzParseHost: a normalized allowed_hosts entry parses to itself and builds a policy.
func FuzzParseHost(f *testing.F) {
	for _, s := range []string{"gw.example.com", "*.a.b", "[::1]", "10.0.0.1", "A.B.", "*"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseHost(s)
		if err != nil {
			return
		}
		again, err := ParseHost(n)
		if err != nil || again != n {
			t.Fatalf("ParseHost(%q) = %q, which parses to %q, %v", s, n, again, err)
		}
		if _, err := New("127.0.0.1:8080", []string{n}, nil); err != nil {
			t.Fatalf("New with %q: %v", n, err)
		}
	})
}
