//go:build tollgate_faults

package main

import (
	"context"
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
