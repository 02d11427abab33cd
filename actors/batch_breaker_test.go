package actors

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/actors/policy/breaker"
	"github.com/tollgate/tollgate/providers/llm"
)

// downNeutralThenHeld answers its first call provider-down (the breaker opens), its second a
// 400 (a neutral probe: the next probe may go), and hands every later call to held.
type downNeutralThenHeld struct {
	*heldBackend
	n atomic.Int64
}

func (b *downNeutralThenHeld) Open(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	switch b.n.Add(1) {
	case 1:
		return nil, &llm.Error{Kind: llm.KindProviderUnavailable, Provider: "a", Message: "503 down"}
	case 2:
		return nil, &llm.Error{Kind: llm.KindUpstreamInvalid, Provider: "a", Message: "400 bad"}
	}
	return b.heldBackend.Open(ctx, req)
}

// halfOpenGateway is provider a (4 lanes) with a breaker opened by one failure for 30ms,
// and b, a plain held backend. When it returns a's breaker is half-open and its next call,
// held by the test, is the probe; with neutral, a first probe was answered by a 400 (a
// neutral ending, which sets the start cap again), else the breaker's open period has just
// ended and nothing happened since.
func halfOpenGateway(t *testing.T, neutral bool) (g *Gateway, fa *downNeutralThenHeld, hb *heldBackend) {
	t.Helper()
	fa, hb = &downNeutralThenHeld{heldBackend: newHeld()}, newHeld()
	a := testProvider("a", fa, "x")
	a.Lanes, a.Models[0].Lanes = 4, 4
	a.Breaker = breaker.Config{Failures: 1, OpenFor: 30 * time.Millisecond}
	g = newTestGateway(t, 10, 16, a, testProvider("b", hb, "z"))
	ctx := context.Background()
	if r := recv(t, startAsync(ctx, g, "a/x", llm.Interactive)); llm.KindOf(r.err) != llm.KindProviderUnavailable {
		t.Fatalf("first call: %v, want provider_unavailable", r.err)
	}
	halfOpen := func(st AdminState) bool { return st.Providers[0].Breaker.State == "half_open" }
	waitState(t, g, "a's breaker half-open", halfOpen)
	waitState(t, g, "idle", idle)
	if !neutral {
		fa.n.Store(2) // no 400: the next call is held
		return g, fa, hb
	}
	if r := recv(t, startAsync(ctx, g, "a/x", llm.Interactive)); llm.KindOf(r.err) != llm.KindUpstreamInvalid {
		t.Fatalf("the probe: %v, want its 400", r.err)
	}
	waitState(t, g, "a's breaker half-open, its probe answered", halfOpen)
	waitState(t, g, "idle", idle) // the probe's lanes are back: a's running calls are the test's
	return g, fa, hb
}

// providerPart asks provider p alone for its part of the state (the others may be held).
func providerPart(t *testing.T, g *Gateway, p int) ProviderState {
	t.Helper()
	reply := make(chan statePart, 1)
	g.system.Root.Send(g.slots.at(p).pid.Load(), &stateQuery{reply: reply})
	select {
	case sp := <-reply:
		return sp.provider
	case <-time.After(5 * time.Second):
		t.Fatal("no state from the provider within 5s")
		return ProviderState{}
	}
}

// TestBatchTakesTheHalfOpenProbe: a batch member reserved while its provider's breaker is
// half-open is the probe from its reservation on, so a call arriving before the batch
// commits waits for the probe's answer instead of becoming a second probe. Provider b's
// actor is held on a state query, so that a's reservation stands while the call arrives.
// Before the fix the arrival restored the start cap, ran as the probe, and the commit sent
// the batch member through the half-open breaker as well: two calls on a.
func TestBatchTakesTheHalfOpenProbe(t *testing.T) {
	g, fa, hb := halfOpenGateway(t, true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	gate := make(chan statePart) // unbuffered: b's actor blocks until the test reads
	g.system.Root.Send(g.slots.at(1).pid.Load(), &stateQuery{reply: gate})
	var open sync.Once
	openGate := func() { open.Do(func() { <-gate }) }
	defer openGate() // a failing test must not leave b blocked: the gateway's shutdown waits for it
	batch := make(chan error, 1)
	var members []llm.BatchMember
	go func() { // exits when the batch is decided and its members opened
		var err error
		members, err = g.StartBatch(ctx, []string{"a/x", "b/z"}, llm.Normal, batchReq())
		batch <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for providerPart(t, g, 0).Running == 0 { // a's member reserved: running in its policy
		if time.Now().After(deadline) {
			t.Fatal("a never reserved the batch's member")
		}
		time.Sleep(time.Millisecond) // polling with a deadline
	}
	single := startAsync(ctx, g, "a/x", llm.Interactive)
	var st ProviderState
	for st = providerPart(t, g, 0); st.Queued == 0 && st.Running < 2; st = providerPart(t, g, 0) {
		if time.Now().After(deadline) {
			select {
			case r := <-single:
				t.Fatalf("the single call was answered at once: %v", r.err)
			default:
			}
			t.Fatalf("the single call neither queued nor started on a: %+v", st)
		}
		time.Sleep(time.Millisecond) // polling with a deadline
	}
	if st.Running != 1 || st.Queued != 1 {
		t.Fatalf("a runs %d and queues %d while its breaker is half-open with the batch's probe reserved; want 1 and 1", st.Running, st.Queued)
	}
	openGate() // b goes on: the batch commits
	if err := <-batch; err != nil {
		t.Fatalf("batch: %v", err)
	}
	for _, m := range members {
		if m.Err != nil {
			t.Fatalf("member %s: %v", m.Model, m.Err)
		}
	}
	probe, other := fa.next(t), hb.next(t)
	fa.noCall(t)
	if n := fa.active.Load(); n != 1 {
		t.Fatalf("%d calls open on a's half-open backend, want the probe alone", n)
	}
	close(probe.release) // the probe succeeds: the breaker closes and the single call starts
	close(other.release)
	for _, m := range members {
		if _, err := drain(t, m.Stream); err != nil {
			t.Fatalf("member %s: %v", m.Model, err)
		}
	}
	close(fa.next(t).release)
	r := recv(t, single)
	if r.err != nil {
		t.Fatalf("the single call after the probe: %v", r.err)
	}
	if _, err := drain(t, r.stream); err != nil {
		t.Fatal(err)
	}
	if st := waitState(t, g, "idle", idle); st.Providers[0].Breaker.State != "closed" {
		t.Fatalf("a's breaker %s after its probe succeeded, want closed", st.Providers[0].Breaker.State)
	}
}

// TestBatchHalfOpenBreaker: a batch sees the breaker as it is now. Half-open with no probe
// out, a batch of one member of it is the probe (before the fix the start cap still read
// the open breaker's 0, and the batch was refused "its probe goes in 0s"); with the probe
// out, a batch is refused saying so.
func TestBatchHalfOpenBreaker(t *testing.T) {
	g, fa, hb := halfOpenGateway(t, false)
	ctx := context.Background()
	members, err := g.StartBatch(ctx, []string{"a/x", "b/z"}, llm.Normal, batchReq())
	if err != nil {
		t.Fatalf("batch while a's breaker is half-open: %v, want it to run with a's member the probe", err)
	}
	probe, other := fa.next(t), hb.next(t)
	close(other.release)
	_, err = g.StartBatch(ctx, []string{"a/x"}, llm.Normal, batchReq())
	if llm.KindOf(err) != llm.KindBatchCapacity || !strings.Contains(err.Error(), "probe call is out") {
		t.Fatalf("batch with a's probe out: %v, want batch_capacity_unavailable saying the probe is out", err)
	}
	close(probe.release)
	for _, m := range members {
		if _, err := drain(t, m.Stream); err != nil {
			t.Fatalf("member %s: %v", m.Model, err)
		}
	}
	if st := waitState(t, g, "idle", idle); st.Providers[0].Breaker.State != "closed" {
		t.Fatalf("a's breaker %s after its probe succeeded, want closed", st.Providers[0].Breaker.State)
	}
}
