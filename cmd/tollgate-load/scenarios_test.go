package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// protoactor's dead-letter throttle parks one goroutine for its interval after a message
	// to a stopped actor (a release racing a shutdown); it ends by itself.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
}

// TestScenarios runs the CI scenarios in process, under the race detector when enabled: each
// must hold every invariant.
func TestScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("load scenarios take a few seconds")
	}
	for _, name := range []string{"burst-20", "burst-50", "mixed-priority", "cancel-storm", "slow-readers", "retry-storm", "learn-lanes", "reload", "forbidden-model", "cluster", "noisy-neighbour"} {
		t.Run(name, func(t *testing.T) {
			ss, err := choose(name, false)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for _, r := range ss[0].run(ctx, runOpts{seed: 1}) {
				if r.Figures["not_run"] == 1 { // cluster without redis-server
					if os.Getenv("CI") != "" {
						t.Fatalf("%s: redis-server not found (CI installs Debian's redis-server)", r.Scenario)
					}
					t.Skip("redis-server not installed (apt-get install redis-server); CI runs this scenario")
				}
				if len(r.Breaches) > 0 {
					t.Errorf("%s [%s]: %s", r.Scenario, r.Setup, strings.Join(r.Breaches, "\n"))
				}
				if r.Requests == 0 {
					t.Errorf("%s [%s]: no requests", r.Scenario, r.Setup)
				}
			}
		})
	}
}

// The checks must be able to fail: each test below breaks one invariant on purpose.

func TestCheckBackendsSeesTooManyCalls(t *testing.T) {
	ctx := context.Background()
	e, err := startLocal(ctx, oneLane(8, 16), 4)
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	if o := send(ctx, e.client, e.base, call{model: "gpu/qwen", tag: "one"}); !ok(o) {
		t.Fatalf("call failed: %+v", o)
	}
	r := newResult("t", "t")
	e.checkBackends(r)
	if len(r.Breaches) != 0 {
		t.Fatalf("one call breached: %v", r.Breaches)
	}
	// Pretend the lanes were zero: the one call that ran now exceeds them on both sides.
	e.setup.maxRunning = 0
	e.setup.providers[0].lanes = 0
	e.local.backends[0].spec.lanes = 0
	e.local.backends[0].spec.models[0].lanes = 0
	e.checkBackends(r)
	joined := strings.Join(r.Breaches, "\n")
	for _, want := range []string{"gateway side: 1 concurrent backend calls in all", "backend side: 1 concurrent calls to gpu;", "gateway side: 1 concurrent calls to gpu/qwen"} {
		if !strings.Contains(joined, want) {
			t.Errorf("breaches lack %q:\n%s", want, joined)
		}
	}
	e.hangUps = true
	r = newResult("t", "t")
	e.checkBackends(r)
	if strings.Contains(strings.Join(r.Breaches, "\n"), "backend side") || r.Figures["backend_overshoot_after_hangups"] == 0 {
		t.Errorf("with hang-ups the backend side should be a figure, not a breach: %v %v", r.Breaches, r.Figures)
	}
}

func TestCheckIdleSeesHeldCall(t *testing.T) {
	ctx := context.Background()
	e, err := startLocal(ctx, oneLane(8, 16), 4)
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	done := make(chan outcome, 1)
	go func() { done <- send(ctx, e.client, e.base, call{model: "gpu/qwen", tag: "held", hold: true}) }() // exits when released
	if _, err := e.waitState(ctx, 2*time.Second, func(st stateDoc) bool { return st.Running == 1 }); err != nil {
		t.Fatal(err)
	}
	r := newResult("t", "t")
	e.checkIdle(ctx, r)
	if len(r.Breaches) != 1 || !strings.Contains(r.Breaches[0], "running 1") {
		t.Errorf("breaches %v", r.Breaches)
	}
	e.local.backends[0].tap.release()
	if o := <-done; !ok(o) {
		t.Errorf("held call: %+v", o)
	}
}

func TestCheckGoroutinesSeesLeak(t *testing.T) {
	ctx := context.Background()
	e, err := startLocal(ctx, oneLane(8, 16), 4)
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	defer func(d time.Duration) { settleWithin = d }(settleWithin)
	settleWithin = 100 * time.Millisecond
	base := e.baseline()
	stop := make(chan struct{})
	for range goroutineSlack + 3 {
		go func() { <-stop }() // exits when the test closes stop
	}
	r := newResult("t", "t")
	e.checkGoroutines(r, base)
	close(stop)
	if len(r.Breaches) != 1 || !strings.Contains(r.Breaches[0], "did not return to baseline") {
		t.Errorf("breaches %v", r.Breaches)
	}
}

// TestLearnedAfter: the learn-lanes check counts only calls that started once the calls in
// flight at the first refusal had ended, and breaches when those exceed the limit.
func TestLearnedAfter(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// Four calls in flight at the refusal (t=10), the last ending at 30.
	before := []span{{"h", at(0), at(20)}, {"h", at(1), at(25)}, {"h", at(2), at(30)}, {"h", at(3), at(15)}}
	three := []span{{"h", at(31), at(50)}, {"h", at(32), at(50)}, {"h", at(33), at(50)}, {"h", at(50), at(60)}}
	for _, tc := range []struct {
		name    string
		refused []time.Time
		spans   []span
		breach  string
	}{
		{"three after settling", []time.Time{at(10)}, append(append([]span{}, before...), three...), ""},
		{"a fourth after settling", []time.Time{at(10)}, append(append([]span{}, before...), append(three, span{"h", at(40), at(45)})...), "saw 4 concurrent calls"},
		{"no refusal", nil, three, "never refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newResult("t", "t")
			learnedAfter(r, tc.refused, tc.spans, 3)
			got := strings.Join(r.Breaches, "\n")
			if tc.breach == "" && got != "" || tc.breach != "" && !strings.Contains(got, tc.breach) {
				t.Errorf("breaches %q, want %q", got, tc.breach)
			}
		})
	}
}
