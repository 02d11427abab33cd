package httpapi

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// healthGateway is a gateway with the HealthGateway capability, in a given condition.
type healthGateway struct {
	stubGateway
	failed   error
	down     []string
	serving  int
	draining bool
}

func (g healthGateway) Failed() error                 { return g.failed }
func (g healthGateway) OutOfService() ([]string, int) { return g.down, g.serving }
func (g healthGateway) Draining() bool                { return g.draining }

var _ HealthGateway = healthGateway{}

// TestProbes: what /healthz and /readyz answer in each condition of the gateway.
func TestProbes(t *testing.T) {
	fail := errors.New("the gateway's supervisor failed repeatedly")
	cases := []struct {
		name              string
		gw                Gateway
		unready           bool
		healthz, readyz   int
		healthzB, readyzB string
	}{
		{name: "no health capability", gw: stubGateway{}, healthz: 200, healthzB: `{"status":"ok"}`, readyz: 200, readyzB: `{"status":"ready"}`},
		{name: "serving", gw: healthGateway{serving: 2}, healthz: 200, healthzB: `{"status":"ok"}`, readyz: 200, readyzB: `{"status":"ready"}`},
		{name: "one provider out of service", gw: healthGateway{down: []string{"codex"}, serving: 1},
			healthz: 200, healthzB: `{"status":"ok"}`, readyz: 200, readyzB: `{"status":"ready","degraded":["codex"]}`},
		{name: "every provider out of service", gw: healthGateway{down: []string{"codex", "claude"}},
			healthz: 200, healthzB: `{"status":"ok"}`, readyz: 503, readyzB: `{"status":"unavailable","degraded":["codex","claude"]}`},
		{name: "failed", gw: healthGateway{failed: fail, serving: 1},
			healthz: 503, healthzB: `{"status":"failed"}`, readyz: 503, readyzB: `{"status":"failed"}`},
		{name: "failed while draining", gw: healthGateway{failed: fail, draining: true}, unready: true,
			healthz: 503, healthzB: `{"status":"failed"}`, readyz: 503, readyzB: `{"status":"failed"}`},
		{name: "draining", gw: healthGateway{serving: 1, draining: true},
			healthz: 200, healthzB: `{"status":"ok"}`, readyz: 503, readyzB: `{"status":"draining"}`},
		{name: "unready", gw: healthGateway{serving: 1}, unready: true,
			healthz: 200, healthzB: `{"status":"ok"}`, readyz: 503, readyzB: `{"status":"draining"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Options{Gateway: tc.gw})
			if tc.unready {
				s.Unready()
			}
			for _, p := range []struct {
				path   string
				status int
				body   string
			}{{"/healthz", tc.healthz, tc.healthzB}, {"/readyz", tc.readyz, tc.readyzB}} {
				rec := httptest.NewRecorder()
				s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p.path, nil))
				if got := strings.TrimSpace(rec.Body.String()); rec.Code != p.status || got != p.body {
					t.Errorf("%s: %d %s, want %d %s", p.path, rec.Code, got, p.status, p.body)
				}
			}
		})
	}
}
