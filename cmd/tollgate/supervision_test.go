//go:build tollgate_faults

package main

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/actors"
)

// Supervision over HTTP, with panics injected into the actors (built with -tags
// tollgate_faults, as make test runs it): a crash answers the call it was handling with a
// clean 503 the SDKs retry, and disturbs nothing else — the running stream goes on, the
// queued call runs, and full capacity is back.
func TestSupervisionOverHTTP(t *testing.T) {
	for _, f := range []actors.Fault{
		{Actor: "provider", Provider: "p", On: "arrive"},
		{Actor: "lane", Provider: "p", Model: "n", On: "startCall"},
		{Actor: "supervisor", On: "dispatchNow"},
	} {
		t.Run(f.Actor, func(t *testing.T) {
			bs, held := heldSet("p")
			g := startGateway(t, `
providers:
  - {name: p, kind: fake, lanes: 2, model_lanes: 1, queue_length: 4, models: [{id: m}, {id: n}]}
`, bs)
			ctx := context.Background()
			running := postAsync(ctx, g.URL, "p/m", "", true)
			c1 := held.next(t)
			queued := postAsync(ctx, g.URL, "p/m", "", false)
			g.waitQueued(t, 1)
			if err := g.Gateway.InjectFault(f); err != nil {
				t.Fatal(err)
			}
			// The fault fires on this call's way in (the free model would start at once).
			hit := postAsync(ctx, g.URL, "p/n", "", false)
			if f.Actor == "supervisor" {
				// A supervisor crash loses no call: rebuilt from the providers' offers, it
				// grants the call.
				close(held.next(t).release)
				if a := await(t, hit); a.status != 200 {
					t.Fatalf("the call during the supervisor's rebuild: %d %s", a.status, a.body)
				}
			} else if a := await(t, hit); a.status != 503 || !strings.Contains(a.body, `"code":"provider_unavailable"`) ||
				a.header.Get("Retry-After") == "" {
				t.Fatalf("the call the fault hit: %d %v %s", a.status, a.header, a.body)
			}
			// The running stream was not disturbed.
			close(c1.release)
			if a := await(t, running); a.status != 200 || !strings.Contains(a.body, "[DONE]") || strings.Contains(a.body, `"error"`) {
				t.Fatalf("the running stream after the fault: %d %s", a.status, a.body)
			}
			close(held.next(t).release)
			if a := await(t, queued); a.status != 200 {
				t.Fatalf("the queued call after the fault: %d %s", a.status, a.body)
			}
			r3 := postAsync(ctx, g.URL, "p/m", "", false)
			r4 := postAsync(ctx, g.URL, "p/n", "", false)
			c3, c4 := held.next(t), held.next(t)
			close(c3.release)
			close(c4.release)
			await(t, r3)
			await(t, r4)
			g.waitIdle(t)
		})
	}
}

// TestSupervisionOutOfServiceProbes takes providers out of service one after the other by a
// fault that repeats: /readyz stays 200 and names them under "degraded" while another still
// serves, answers 503 "unavailable" once none is left, /healthz stays 200 (the process is
// sound), and tollgate_provider_out_of_service reads 1 for each.
func TestSupervisionOutOfServiceProbes(t *testing.T) {
	g := startGateway(t, `
providers:
  - {name: p, kind: fake, models: [{id: m}]}
  - {name: q, kind: fake, models: [{id: m}]}
`, nil)
	ctx := context.Background()
	takeDown := func(name string) {
		t.Helper()
		if err := g.Gateway.InjectFault(actors.Fault{Actor: "provider", Provider: name, On: "arrive", Times: -1}); err != nil {
			t.Fatal(err)
		}
		for i := 0; ; i++ {
			down, _ := g.Gateway.OutOfService()
			if slices.Contains(down, name) {
				return
			}
			if i == 20 {
				t.Fatalf("%s still in service after %d panics", name, g.Gateway.FaultsFired())
			}
			if a := post(ctx, g.URL, name+"/m", "", false); a.status != http.StatusServiceUnavailable {
				t.Fatalf("a call that crashed %s: %d %s", name, a.status, a.body)
			}
		}
	}
	probes := func(readyz int, readyzBody string) {
		t.Helper()
		if code, body := probe(g.URL + "/healthz"); code != http.StatusOK || body != `{"status":"ok"}` {
			t.Errorf("/healthz: %d %s", code, body)
		}
		if code, body := probe(g.URL + "/readyz"); code != readyz || body != readyzBody {
			t.Errorf("/readyz: %d %s, want %d %s", code, body, readyz, readyzBody)
		}
	}
	takeDown("p")
	probes(http.StatusOK, `{"status":"ready","degraded":["p"]}`)
	if a := post(ctx, g.URL, "q/m", "", false); a.status != http.StatusOK {
		t.Errorf("q beside p out of service: %d %s", a.status, a.body)
	}
	fams := scrape(t, g.URL, "")
	if p, q := value(t, fams, "tollgate_provider_out_of_service", "provider=p"),
		value(t, fams, "tollgate_provider_out_of_service", "provider=q"); p != 1 || q != 0 {
		t.Errorf("tollgate_provider_out_of_service: p %v, q %v; want 1 and 0", p, q)
	}
	takeDown("q")
	probes(http.StatusServiceUnavailable, `{"status":"unavailable","degraded":["p","q"]}`)
}
