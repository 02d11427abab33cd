//go:build tollgate_faults

package actors

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// statedOnce refuses its first call for capacity, stating a limit of one concurrent call,
// and serves every other call "ok".
type statedOnce struct{ calls atomic.Int64 }

func (b *statedOnce) Open(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	if b.calls.Add(1) == 1 {
		return nil, &llm.Error{Kind: llm.KindUpstreamRateLimited, Provider: "p", StatedLimit: 1, RetryAfter: time.Second,
			Message: "more than 1 concurrent requests"}
	}
	return &okStream{}, nil
}

// TestCrashKeepsHealth: what a provider learned of its backend is a fact, kept across a
// crash of its actor (docs/resilience.md): lanes learned from a stated limit are still the
// provider's effective lanes after the rebuild, for the same reason.
func TestCrashKeepsHealth(t *testing.T) {
	p := testProvider("p", &statedOnce{}, "m")
	p.Lanes, p.Models[0].Lanes = 4, 4
	g := newTestGateway(t, 10, 16, p)
	ctx := context.Background()
	if o := got(t, runCall(ctx, g, "p/m")); o.err != nil || o.text != "ok" {
		t.Fatalf("the refused call, requeued: %q %v", o.text, o.err)
	}
	learned := func(s AdminState) bool {
		return len(s.Providers) == 1 && s.Providers[0].State == "ok" && s.Providers[0].EffectiveLanes == 1 &&
			s.Providers[0].EffectiveLanesReason == "stated_limit" && idle(s)
	}
	waitState(t, g, "1 lane learned from the stated limit", learned)
	if err := g.InjectFault(Fault{Actor: "provider", On: "arrive"}); err != nil {
		t.Fatal(err)
	}
	if o := got(t, runCall(ctx, g, "p/m")); !clean(o.err) {
		t.Fatalf("the call that crashed its provider: %v", o.err)
	}
	if g.FaultsFired() != 1 {
		t.Fatalf("%d faults fired, want 1", g.FaultsFired())
	}
	waitState(t, g, "the learned lane kept across the rebuild", learned)
	if o := got(t, runCall(ctx, g, "p/m")); o.err != nil || o.text != "ok" {
		t.Fatalf("a call after the rebuild: %q %v", o.text, o.err)
	}
}
