package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/cmd/internal/app"
	"github.com/tollgate/tollgate/cmd/internal/config"
	"github.com/tollgate/tollgate/providers/llm"
)

// gateway is a Tollgate wired exactly as the binary wires it, served on a loopback listener.
type gateway struct {
	*app.App
	URL string
}

// startGateway parses a YAML config (defaults and validation included) and serves it. Backends
// override the adapters of the named providers. The gateway's logs are dropped.
func startGateway(t testing.TB, yaml string, backends map[string]llm.Backend) *gateway {
	t.Helper()
	return serveGateway(t, yaml, backends, zerolog.Nop())
}

// serveGateway is startGateway with the gateway's logger chosen by the caller.
func serveGateway(t testing.TB, yaml string, backends map[string]llm.Backend, log zerolog.Logger) *gateway {
	t.Helper()
	return serveApp(t, yaml, app.Options{Logger: log, Backends: backends})
}

// serveApp is startGateway with every app option chosen by the caller.
func serveApp(t testing.TB, yaml string, o app.Options) *gateway {
	t.Helper()
	return serveWrapped(t, yaml, o, nil)
}

// serveWrapped is serveApp with the binary's server handler wrapped by wrap (nil: as it is),
// so a test can see every request the gateway serves and every answer's status.
func serveWrapped(t testing.TB, yaml string, o app.Options, wrap func(http.Handler) http.Handler) *gateway {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	if o.StateDir == "" {
		o.StateDir = t.TempDir() // a store of its own, never the user's state directory
	}
	a, err := app.New(context.Background(), cfg, o)
	if err != nil {
		t.Fatalf("app: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		a.Handler = wrap(a.Handler)
	}
	srv := a.Server() // the server the binary runs, with its connection limits
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }() // exits when the cleanup closes the server
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := a.Drain(ctx); err != nil {
			t.Errorf("drain: %v", err)
		}
	})
	return &gateway{App: a, URL: "http://" + ln.Addr().String()}
}

// waitIdle polls the gateway's state until nothing runs or waits.
func (g *gateway) waitIdle(t testing.TB) {
	t.Helper()
	g.waitIdleWithin(t, 2*time.Second)
}

// waitIdleWithin is waitIdle with a deadline of d.
func (g *gateway) waitIdleWithin(t testing.TB, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		st := g.Gateway.State()
		if st.Running == 0 && st.Queued == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("gateway not idle %s after the end: running %d, queued %d", d, st.Running, st.Queued)
		}
		time.Sleep(2 * time.Millisecond) // polling with a deadline
	}
}

// waitQueued polls until n calls wait in the gateway's queues.
func (g *gateway) waitQueued(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for g.Gateway.State().Queued != n {
		if time.Now().After(deadline) {
			t.Fatalf("never saw %d queued: %+v", n, g.Gateway.State())
		}
		time.Sleep(time.Millisecond) // polling with a deadline
	}
}

// noResilience is the YAML, at a provider's indentation, that turns off what would retry a
// failed call, rest its key, learn lower lanes from it or open the provider's circuit: the
// tests of how one backend answer is classified and relayed see each answer as it came
// (resilience_test.go tests those rules). noRetries is the part CLI kinds accept.
const (
	noRetries    = "    retries: 0\n    adaptive_lanes: false\n    breaker: {failures: 1000, ratio: 1}\n"
	noResilience = noRetries + "    key_cooldown: 1ms\n    max_key_cooldown: 1ms\n"
)

// noRedirectClient is a plain client for raw HTTP checks.
var rawClient = &http.Client{Timeout: 10 * time.Second}
