//go:build tollgate_faults

package actors

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/actors/policy/breaker"
	"github.com/tollgate/tollgate/providers/llm"
)

// downFirst answers its first n calls provider-down (503), then serves "ok".
type downFirst struct {
	n     int64
	calls atomic.Int64
}

func (b *downFirst) Open(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	if b.calls.Add(1) <= b.n {
		return nil, &llm.Error{Kind: llm.KindProviderUnavailable, Provider: "p", Message: "503 down"}
	}
	return &okStream{}, nil
}

func breakerIs(state string) func(AdminState) bool {
	return func(st AdminState) bool {
		b := st.Providers[0].Breaker
		return b != nil && b.State == state
	}
}

// TestCrashOnProbeRetryAskReopensBreaker: a half-open probe whose failed attempt crashes
// the provider actor (the retryAsk is answered by the supervisor's strategy, not by the
// actor) still counts as the probe's failure: the breaker opens again, and its next probe
// goes through and closes it. Before the fix the probe's failure was never recorded and
// the breaker stayed half-open with its probe out for good: nothing started again. The
// clock moves only when the test says, so that an open breaker stays open until it is
// read, however slowly the machine runs.
func TestCrashOnProbeRetryAskReopensBreaker(t *testing.T) {
	b := &downFirst{n: 2}
	p := testProvider("p", b, "m")
	openFor := 50 * time.Millisecond
	p.Breaker = breaker.Config{Failures: 1, OpenFor: openFor}
	p.QueueTimeout = 500 * time.Millisecond
	clock := &testClock{now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	g := gatewayOf(t, Options{MaxRunning: 10, MaxAdmitted: 16, Providers: []Provider{p}, Logger: zerolog.Nop(), Now: clock.Now})
	ctx := context.Background()
	if o := got(t, runCall(ctx, g, "p/m")); llm.KindOf(o.err) != llm.KindProviderUnavailable {
		t.Fatalf("first call: %v, want provider_unavailable", o.err)
	}
	waitState(t, g, "breaker open", breakerIs("open"))
	clock.advance(openFor)
	waitState(t, g, "breaker half-open", breakerIs("half_open"))
	if err := g.InjectFault(Fault{Actor: "provider", On: "retryAsk"}); err != nil {
		t.Fatal(err)
	}
	if o := got(t, runCall(ctx, g, "p/m")); llm.KindOf(o.err) != llm.KindProviderUnavailable {
		t.Fatalf("the probe: %v, want provider_unavailable", o.err)
	}
	if n := g.FaultsFired(); n != 1 {
		t.Fatalf("%d faults fired, want the probe's retryAsk's", n)
	}
	st := waitState(t, g, "breaker open again after the failed probe", breakerIs("open"))
	clock.advance(time.Duration(st.Providers[0].Breaker.RetryAfterMs) * time.Millisecond) // it opens for longer each time
	waitState(t, g, "breaker half-open for the next probe", breakerIs("half_open"))
	o := got(t, runCall(ctx, g, "p/m"))
	if o.err != nil || o.text != "ok" {
		t.Fatalf("the next probe: %q, %v; want ok (backend calls %d)", o.text, o.err, b.calls.Load())
	}
	waitState(t, g, "breaker closed", breakerIs("closed"))
	waitState(t, g, "idle", idle)
}
