package policy

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

func runAll(t *testing.T, scripts []script) {
	for _, s := range scripts {
		s.run(t)
	}
}

func TestRejections(t *testing.T) {
	runAll(t, []script{{
		name:      "max_admitted reached: gateway_overloaded",
		limits:    Limits{MaxRunning: 1, MaxAdmitted: 2},
		providers: []ProviderSpec{prov("a", 1, 8, 1)},
		steps: []step{
			arrive(1, 0, 0, I, "started"),
			arrive(2, 0, 0, I, "queued"),
			arrive(3, 0, 0, I, "gateway_overloaded"),
			counts(1, 1),
		},
	}, {
		name:      "queue_length reached: provider_queue_full",
		limits:    Limits{MaxRunning: 10, MaxAdmitted: 16},
		providers: []ProviderSpec{prov("a", 1, 1, 1)},
		steps: []step{
			arrive(1, 0, 0, I, "started"),
			arrive(2, 0, 0, I, "queued"),
			arrive(3, 0, 0, B, "provider_queue_full"),
			counts(1, 1),
		},
	}, {
		name:      "both reached: overloaded comes first",
		limits:    Limits{MaxRunning: 1, MaxAdmitted: 2},
		providers: []ProviderSpec{prov("a", 1, 1, 1)},
		steps: []step{
			arrive(1, 0, 0, I, "started"),
			arrive(2, 0, 0, I, "queued"),
			arrive(3, 0, 0, I, "gateway_overloaded"),
		},
	}, {
		name:      "queue_length 0: no waiting at all",
		limits:    Limits{MaxRunning: 10, MaxAdmitted: 16},
		providers: []ProviderSpec{prov("a", 1, 0, 1)},
		steps: []step{
			arrive(1, 0, 0, I, "started"),
			arrive(2, 0, 0, I, "provider_queue_full"),
		},
	}, {
		// SPEC §2 checks max_admitted only for a request that cannot start: one for an idle
		// provider starts even with running+queued at the cap.
		name:      "a request that can start is not refused by max_admitted",
		limits:    Limits{MaxRunning: 2, MaxAdmitted: 2},
		providers: []ProviderSpec{prov("a", 1, 8, 1), prov("b", 1, 8, 1)},
		steps: []step{
			arrive(1, 0, 0, I, "started"),
			arrive(2, 0, 0, I, "queued"),
			arrive(3, 1, 0, I, "started"),
			arrive(4, 1, 0, I, "gateway_overloaded"),
			counts(2, 1),
		},
	}, {
		name:      "a rejected request leaves no trace and its id can come back",
		limits:    Limits{MaxRunning: 1, MaxAdmitted: 16},
		providers: []ProviderSpec{prov("a", 1, 1, 1)},
		steps: []step{
			arrive(1, 0, 0, I, "started"),
			arrive(2, 0, 0, B, "queued"),
			arrive(3, 0, 0, I, "provider_queue_full"),
			cancel(3, false),
			finishFails(3),
			counts(1, 1),
			finishThen(1, 2),
			arrive(3, 0, 0, I, "queued"),
		},
	}, {
		name:      "caller mistakes are refused without a change",
		limits:    Limits{MaxRunning: 1, MaxAdmitted: 16},
		providers: []ProviderSpec{prov("a", 1, 1, 1)},
		steps: []step{
			arrive(1, 0, 0, I, "started"),
			arrive(1, 0, 0, I, "invalid_request"),
			arrive(2, 1, 0, I, "model_not_found"),
			arrive(2, 0, 1, I, "model_not_found"),
			arrive(2, -1, 0, I, "model_not_found"),
			arrive(2, 0, 0, llm.Priority(3), "invalid_request"),
			counts(1, 0),
		},
	}})
}

func TestQueueDeadline(t *testing.T) {
	runAll(t, []script{{
		name:      "queued requests expire at arrival + queue_timeout, in arrival order",
		limits:    Limits{MaxRunning: 10, MaxAdmitted: 16},
		providers: []ProviderSpec{prov("a", 1, 8, 1)},
		steps: []step{
			wake(-1),
			arrive(1, 0, 0, I, "started"),
			wake(-1),
			arrive(2, 0, 0, B, "queued"),
			advance(5 * time.Second),
			arrive(3, 0, 0, I, "queued"),
			wake(10 * time.Second),
			advance(5*time.Second - time.Nanosecond),
			expire(),
			advance(time.Nanosecond),
			expire(2),
			wake(15 * time.Second),
			expire(),
			advance(time.Hour),
			expire(3),
			wake(-1),
			counts(1, 0),
			finishThen(1),
		},
	}, {
		name:   "each provider its own timeout",
		limits: Limits{MaxRunning: 10, MaxAdmitted: 16},
		providers: func() []ProviderSpec {
			a, b := prov("a", 1, 8, 1), prov("b", 1, 8, 1)
			a.QueueTimeout, b.QueueTimeout = 30*time.Second, 3*time.Second
			return []ProviderSpec{a, b}
		}(),
		steps: []step{
			arrive(1, 0, 0, I, "started"),
			arrive(2, 1, 0, I, "started"),
			arrive(3, 0, 0, I, "queued"),
			arrive(4, 1, 0, I, "queued"),
			wake(3 * time.Second),
			advance(3 * time.Second),
			expire(4),
			wake(30 * time.Second),
			advance(time.Minute),
			expire(3),
		},
	}, {
		name:      "a request that started no longer expires",
		limits:    Limits{MaxRunning: 10, MaxAdmitted: 16},
		providers: []ProviderSpec{prov("a", 1, 8, 1)},
		steps: []step{
			arrive(1, 0, 0, I, "started"),
			arrive(2, 0, 0, I, "queued"),
			advance(9 * time.Second),
			finishThen(1, 2),
			wake(-1),
			advance(time.Hour),
			expire(),
			finish(2),
		},
	}})
}

func TestCancel(t *testing.T) {
	runAll(t, []script{{
		name:      "cancel while queued",
		limits:    Limits{MaxRunning: 10, MaxAdmitted: 16},
		providers: []ProviderSpec{prov("a", 1, 8, 1)},
		steps: []step{
			arrive(1, 0, 0, I, "started"),
			arrive(2, 0, 0, I, "queued"),
			arrive(3, 0, 0, I, "queued"),
			cancel(2, true),
			cancel(2, false),
			cancel(1, false), // running: the caller stops it and then finishes it
			cancel(99, false),
			counts(1, 1),
			finishThen(1, 3),
			finishThen(3),
			expire(),
			counts(0, 0),
		},
	}, {
		name:      "a cancelled request frees its queue place",
		limits:    Limits{MaxRunning: 10, MaxAdmitted: 16},
		providers: []ProviderSpec{prov("a", 1, 1, 1)},
		steps: []step{
			arrive(1, 0, 0, I, "started"),
			arrive(2, 0, 0, I, "queued"),
			arrive(3, 0, 0, I, "provider_queue_full"),
			cancel(2, true),
			arrive(3, 0, 0, I, "queued"),
			wake(10 * time.Second),
		},
	}, {
		name:      "finish of queued or twice is refused",
		limits:    Limits{MaxRunning: 10, MaxAdmitted: 16},
		providers: []ProviderSpec{prov("a", 1, 8, 1)},
		steps: []step{
			arrive(1, 0, 0, I, "started"),
			arrive(2, 0, 0, I, "queued"),
			finishFails(2),
			finishThen(1, 2),
			finishFails(1),
			counts(1, 0),
		},
	}})
}

func TestNoBarging(t *testing.T) {
	runAll(t, []script{{
		name:      "a request queued behind the global cap starts as soon as the cap frees, before a newcomer",
		limits:    Limits{MaxRunning: 1, MaxAdmitted: 16},
		providers: []ProviderSpec{prov("a", 2, 8, 2)},
		steps: []step{
			arrive(1, 0, 0, I, "started"),
			arrive(2, 0, 0, I, "queued"),
			finishThen(1, 2),
			arrive(3, 0, 0, I, "queued"),
			cancel(2, false), // running
			finishThen(2, 3),
		},
	}, {
		name:      "the freed slot goes to the queued request, not to a newcomer of a lower class",
		limits:    Limits{MaxRunning: 1, MaxAdmitted: 16},
		providers: []ProviderSpec{prov("a", 2, 8, 2)},
		steps: []step{
			arrive(1, 0, 0, I, "started"),
			arrive(2, 0, 0, I, "queued"),
			finishThen(1, 2),
			arrive(3, 0, 0, N, "queued"),
			counts(1, 1),
			wake(10 * time.Second),
			finishThen(2, 3),
		},
	}, {
		name:      "the same, across providers: the queued request's turn comes first",
		limits:    Limits{MaxRunning: 1, MaxAdmitted: 16},
		providers: []ProviderSpec{prov("a", 2, 8, 2), prov("b", 2, 8, 2)},
		steps: []step{
			arrive(1, 0, 0, I, "started"),
			arrive(2, 1, 0, I, "queued"),
			finishThen(1, 2),
			arrive(3, 0, 0, I, "queued"),
			dispatch(),
		},
	}, {
		// The queued request is not eligible (its lane is busy), so it holds nothing back,
		// not even the last global slot.
		name:      "a newcomer for a different, idle provider starts when the global cap has room",
		limits:    Limits{MaxRunning: 2, MaxAdmitted: 16},
		providers: []ProviderSpec{prov("a", 1, 8, 1), prov("b", 1, 8, 1)},
		steps: []step{
			arrive(1, 0, 0, I, "started"),
			arrive(2, 0, 0, I, "queued"), // waits for a's lane
			arrive(3, 1, 0, B, "started"),
			counts(2, 1),
		},
	}, {
		name:      "a newcomer for a free model of a busy-model provider starts",
		limits:    Limits{MaxRunning: 3, MaxAdmitted: 16},
		providers: []ProviderSpec{prov("a", 3, 8, 1, 1)},
		steps: []step{
			arrive(1, 0, 0, I, "started"),
			arrive(2, 0, 0, I, "queued"), // waits for model 0's lane
			arrive(3, 0, 1, I, "started"),
		},
	}, {
		name:      "a higher class passes a lower class that waited longer",
		limits:    Limits{MaxRunning: 1, MaxAdmitted: 16},
		providers: []ProviderSpec{prov("a", 2, 8, 2), prov("b", 2, 8, 2)},
		steps: []step{
			arrive(1, 0, 0, I, "started"),
			arrive(2, 1, 0, B, "queued"),
			arrive(3, 0, 0, I, "queued"),
			finishThen(1, 3),
			counts(1, 1),
			finishThen(3, 2),
		},
	}, {
		// The provider's own timer has not fired yet when the newcomer comes: its offer is made
		// at the newcomer's arrival, with the new token, and the grant starts the older one.
		name:      "a newcomer waits behind a request that was waiting for a token",
		limits:    Limits{MaxRunning: 10, MaxAdmitted: 16},
		providers: []ProviderSpec{rated(prov("a", 4, 8, 4), 60, 1)},
		steps: []step{
			arrive(1, 0, 0, I, "started"),
			arrive(2, 0, 0, I, "queued"),
			wake(time.Second),
			advance(time.Second),
			arrive(3, 0, 0, I, "queued"),
			dispatch(2),
			wake(2 * time.Second),
		},
	}})
}

func rated(ps ProviderSpec, rpm, burst int) ProviderSpec {
	ps.RPM, ps.Burst = rpm, burst
	return ps
}

func TestClassOrder(t *testing.T) {
	runAll(t, []script{{
		name:      "interactive, then normal, then background; FIFO within a class",
		limits:    Limits{MaxRunning: 1, MaxAdmitted: 16},
		providers: []ProviderSpec{prov("a", 1, 8, 1)},
		steps: []step{
			arrive(1, 0, 0, I, "started"),
			arrive(2, 0, 0, B, "queued"),
			arrive(3, 0, 0, N, "queued"),
			arrive(4, 0, 0, I, "queued"),
			arrive(5, 0, 0, B, "queued"),
			arrive(6, 0, 0, I, "queued"),
			finishThen(1, 4),
			finishThen(4, 6),
			finishThen(6, 3),
			finishThen(3, 2),
			finishThen(2, 5),
			finishThen(5),
		},
	}, {
		name:      "a blocked higher class does not hold back an eligible lower class",
		limits:    Limits{MaxRunning: 2, MaxAdmitted: 16},
		providers: []ProviderSpec{prov("a", 1, 8, 1), prov("b", 1, 8, 1)},
		steps: []step{
			arrive(1, 0, 0, I, "started"),
			arrive(2, 1, 0, I, "started"),
			arrive(3, 0, 0, I, "queued"),
			arrive(4, 1, 0, B, "queued"),
			finishThen(2, 4),
		},
	}})
}

func TestRoundRobin(t *testing.T) {
	three := []ProviderSpec{prov("a", 1, 8, 1), prov("b", 1, 8, 1), prov("c", 1, 8, 1)}
	runAll(t, []script{{
		name:      "providers take turns starting after the one served last",
		limits:    Limits{MaxRunning: 1, MaxAdmitted: 16},
		providers: three,
		steps: []step{
			arrive(1, 0, 0, I, "started"), // a served last
			arrive(2, 0, 0, I, "queued"),
			arrive(3, 0, 0, I, "queued"),
			arrive(4, 1, 0, I, "queued"),
			arrive(5, 2, 0, I, "queued"),
			arrive(6, 2, 0, I, "queued"),
			finishThen(1, 4), // b
			finishThen(4, 5), // c
			finishThen(5, 2), // a
			finishThen(2, 6), // b has none: c
			finishThen(6, 3), // a
		},
	}, {
		name:      "the first turn goes to the first provider",
		limits:    Limits{MaxRunning: 0, MaxAdmitted: 16},
		providers: three,
		steps: []step{
			arrive(1, 2, 0, I, "queued"),
			arrive(2, 1, 0, I, "queued"),
			arrive(3, 0, 0, I, "queued"),
			check("raise the cap", func(h *harness) error { h.g.SetMaxRunning(3, h.now); return nil }),
			dispatch(3, 2, 1),
		},
	}, {
		name:      "each class keeps its own turn",
		limits:    Limits{MaxRunning: 1, MaxAdmitted: 16},
		providers: three,
		steps: []step{
			arrive(1, 0, 0, B, "started"), // background served a last
			arrive(2, 1, 0, I, "queued"),
			arrive(3, 0, 0, B, "queued"),
			arrive(4, 2, 0, B, "queued"),
			arrive(5, 1, 0, B, "queued"),
			finishThen(1, 2), // interactive served b...
			finishThen(2, 5), // ...but background's turn still goes to b, after a
			finishThen(5, 4),
			finishThen(4, 3),
		},
	}, {
		name:      "a start from Arrive moves the turn as well",
		limits:    Limits{MaxRunning: 1, MaxAdmitted: 16},
		providers: three,
		steps: []step{
			arrive(1, 1, 0, I, "started"), // b
			arrive(2, 0, 0, I, "queued"),
			arrive(3, 2, 0, I, "queued"),
			arrive(4, 1, 0, I, "queued"),
			finishThen(1, 3), // c after b
			finishThen(3, 2), // a after c
			finishThen(2, 4),
		},
	}})
}

func TestModelChoice(t *testing.T) {
	runAll(t, []script{{
		name:      "the model with the fewest running goes first; full models are skipped",
		limits:    Limits{MaxRunning: 4, MaxAdmitted: 16},
		providers: []ProviderSpec{prov("a", 4, 8, 2, 2, 1)},
		steps: []step{
			arrive(1, 0, 0, I, "started"),
			arrive(2, 0, 1, I, "started"),
			arrive(3, 0, 2, I, "started"),
			arrive(4, 0, 0, I, "started"), // global cap reached: m0 2, m1 1, m2 1
			arrive(5, 0, 0, I, "queued"),
			arrive(6, 0, 1, I, "queued"),
			arrive(7, 0, 2, I, "queued"),
			finishThen(3, 7), // m2 has 0 running
			finishThen(1, 5), // m0 1, m1 1, m2 1 (full): tie, 5 waited longer
			finishThen(2, 6), // m1 0
		},
	}, {
		name:      "tie on running: the model whose oldest request waited longest",
		limits:    Limits{MaxRunning: 3, MaxAdmitted: 16},
		providers: []ProviderSpec{prov("a", 3, 8, 2, 2)},
		steps: []step{
			arrive(1, 0, 0, I, "started"),
			arrive(2, 0, 1, I, "started"),
			arrive(3, 0, 0, I, "started"),
			arrive(4, 0, 1, I, "queued"),
			arrive(5, 0, 0, I, "queued"),
			arrive(6, 0, 0, I, "queued"),
			finishThen(3, 4), // m0 1, m1 1: m1's 4 is older than m0's 5
			finishThen(4, 5), // m0 1, m1 1... m1 has nothing queued
			finishThen(5, 6),
		},
	}, {
		name:      "the oldest request counts only within the class being served",
		limits:    Limits{MaxRunning: 3, MaxAdmitted: 16},
		providers: []ProviderSpec{prov("a", 3, 8, 2, 2)},
		steps: []step{
			arrive(1, 0, 0, I, "started"),
			arrive(2, 0, 1, I, "started"),
			arrive(3, 0, 0, I, "started"),
			arrive(4, 0, 0, B, "queued"), // oldest overall, but background
			arrive(5, 0, 1, I, "queued"),
			arrive(6, 0, 0, I, "queued"),
			finishThen(3, 5), // m0 1, m1 1: m1's oldest interactive request is older
		},
	}})
}

func TestFIFOAndEffectiveLanes(t *testing.T) {
	runAll(t, []script{{
		name:      "first come, first served within a model",
		limits:    Limits{MaxRunning: 10, MaxAdmitted: 16},
		providers: []ProviderSpec{prov("a", 1, 8, 1)},
		steps: []step{
			arrive(1, 0, 0, N, "started"),
			arrive(2, 0, 0, N, "queued"),
			advance(time.Second),
			arrive(3, 0, 0, N, "queued"),
			arrive(4, 0, 0, N, "queued"),
			finishThen(1, 2),
			finishThen(2, 3),
			finishThen(3, 4),
		},
	}, {
		name:      "lowered lanes stop nothing, hold new starts, and come back",
		limits:    Limits{MaxRunning: 10, MaxAdmitted: 16},
		providers: []ProviderSpec{prov("a", 3, 8, 3)},
		steps: []step{
			arrive(1, 0, 0, I, "started"),
			arrive(2, 0, 0, I, "started"),
			lanes(0, 1),
			counts(2, 0),
			arrive(3, 0, 0, I, "queued"),
			finishThen(1),
			finishThen(2, 3),
			lanes(0, 99), // clamped to lanes
			arrive(4, 0, 0, I, "started"),
			arrive(5, 0, 0, I, "started"),
			arrive(6, 0, 0, I, "queued"),
			lanes(0, -1),
			check("snapshot", func(h *harness) error {
				if e := h.g.Snapshot().Providers[0].EffectiveLanes; e != 0 {
					return fmt.Errorf("effective lanes %d, want 0", e)
				}
				return nil
			}),
			finishThen(4),
			lanes(0, 3),
			dispatch(6),
		},
	}})
}

func TestRateLimit(t *testing.T) {
	runAll(t, []script{{
		name:      "burst, then one start per interval; the wake follows the token",
		limits:    Limits{MaxRunning: 10, MaxAdmitted: 16},
		providers: []ProviderSpec{rated(prov("a", 8, 8, 8), 60, 2)},
		steps: []step{
			arrive(1, 0, 0, I, "started"),
			arrive(2, 0, 0, I, "started"),
			arrive(3, 0, 0, I, "queued"),
			arrive(4, 0, 0, I, "queued"),
			wake(time.Second),
			// A refused request is told when the limiter has room again, which is when the
			// queue moves on: the next token, in 1s.
			check("retry after", func(h *harness) error {
				if d := h.g.RetryAfter(0, 0, h.now); d != time.Second {
					return fmt.Errorf("RetryAfter = %v, want 1s", d)
				}
				return nil
			}),
			advance(time.Second - time.Nanosecond),
			dispatch(),
			advance(time.Nanosecond),
			dispatch(3),
			wake(2 * time.Second),
			advance(5 * time.Second),
			dispatch(4),
			arrive(5, 0, 0, I, "started"), // the bucket refilled to its burst of 2; 4 took one
			arrive(6, 0, 0, I, "queued"),
		},
	}, {
		name:      "no wake for a token while lanes hold the queue anyway",
		limits:    Limits{MaxRunning: 10, MaxAdmitted: 16},
		providers: []ProviderSpec{rated(prov("a", 1, 8, 1), 6, 1)},
		steps: []step{
			arrive(1, 0, 0, I, "started"),
			arrive(2, 0, 0, I, "queued"),
			wake(10 * time.Second), // the queue deadline; the token (10s) is no earlier
			finish(1),
			wake(10 * time.Second),
			advance(10 * time.Second),
			dispatch(2),
		},
	}, {
		// With the global cap full the provider could start one (its token), not two: a
		// token later it still could start only one, so it sets no timer for it.
		name:      "no wake for a token the offered starts use up themselves",
		limits:    Limits{MaxRunning: 1, MaxAdmitted: 8},
		providers: []ProviderSpec{rated(prov("a", 2, 8, 2), 60, 1), prov("b", 1, 8, 1)},
		steps: []step{
			arrive(1, 1, 0, I, "started"),
			arrive(2, 0, 0, I, "queued"),
			arrive(3, 0, 0, I, "queued"),
			wake(10 * time.Second),
		},
	}, {
		name:      "default burst is max(1, rpm/6)",
		limits:    Limits{MaxRunning: 100, MaxAdmitted: 100},
		providers: []ProviderSpec{rated(prov("a", 100, 100, 100), 18, 0)},
		steps: []step{
			arrive(1, 0, 0, I, "started"),
			arrive(2, 0, 0, I, "started"),
			arrive(3, 0, 0, I, "started"),
			arrive(4, 0, 0, I, "queued"),
			wake(10*time.Second/3 + 1), // the first whole nanosecond a token is there
		},
	}})
}

func TestSnapshotAndLookup(t *testing.T) {
	specs := []ProviderSpec{prov("a", 2, 4, 1, 2), prov("b", 1, 8, 1)}
	g := newComposed(Limits{MaxRunning: 10, MaxAdmitted: 16}, specs)
	g.SetEffectiveLanes(0, 1, t0)
	g.Arrive(1, 0, 1, I, t0)
	g.Arrive(2, 0, 1, N, t0.Add(time.Second))
	g.Arrive(3, 1, 0, B, t0)
	want := gateState{Running: 2, Queued: 1, MaxRunning: 10, MaxAdmitted: 16, Providers: []ProviderState{
		{Name: "a", Lanes: 2, EffectiveLanes: 1, Running: 1, Queued: 1, QueueLength: 4, Models: []ModelState{
			{Name: "a-m0", ModelLanes: 1, EffectiveModelLanes: 1}, {Name: "a-m1", ModelLanes: 2, EffectiveModelLanes: 2, Running: 1, Queued: 1}},
			Clients: map[string]ClientCounts{"": {Running: 1, Queued: 1}}},
		{Name: "b", Lanes: 1, EffectiveLanes: 1, Running: 1, QueueLength: 8, Models: []ModelState{
			{Name: "b-m0", ModelLanes: 1, EffectiveModelLanes: 1, Running: 1}},
			Clients: map[string]ClientCounts{"": {Running: 1}}},
	}}
	if got := g.Snapshot(); !reflect.DeepEqual(got, want) {
		t.Errorf("Snapshot =\n%+v\nwant\n%+v", got, want)
	}
	in, ok := g.Lookup(2)
	wantInfo := gateInfo{Provider: 0, Info: Info{Model: 1, Priority: N, Arrived: t0.Add(time.Second),
		Deadline: t0.Add(11 * time.Second), Client: llm.Client{Weight: 1}}} // the anonymous client, its share
	if !ok || in != wantInfo {
		t.Errorf("Lookup(2) = %+v, %v; want %+v", in, ok, wantInfo)
	}
	in, ok = g.Lookup(3)
	if !ok || !in.Running || !in.Started.Equal(t0) || in.Provider != 1 || in.Priority != B {
		t.Errorf("Lookup(3) = %+v, %v", in, ok)
	}
	if _, ok := g.Lookup(4); ok {
		t.Error("Lookup(4) found an unknown id")
	}
	for _, id := range []ID{1, 3} {
		g.Finish(id, t0)
	}
	if g.Cancel(2, t0) || !g.Finish(2, t0) { // 1's lane went to 2
		t.Error("2 did not start when 1 finished")
	}
	if s := g.Snapshot(); s.Running != 0 || s.Queued != 0 || s.Providers[0].Models[1].Queued != 0 {
		t.Errorf("after everyone left: %+v", s)
	}
}

func TestOutcomeString(t *testing.T) {
	for o, want := range map[Outcome]string{Started: "started", Queued: "queued", Rejected: "rejected", 0: "invalid"} {
		if got := o.String(); got != want {
			t.Errorf("%d: %q, want %q", o, got, want)
		}
	}
}

// A burst: arrivals at several providers whose offers all reach the dispatcher before it
// dispatches (it coalesces them) must be admitted as many as the same arrivals one at a time
// would be: the dispatcher judges queue_full too, so a request it lets wait past
// max_admitted's check is one its provider keeps.
func TestBurstAdmitsAsSequentialArrivals(t *testing.T) {
	l := Limits{MaxRunning: 10, MaxAdmitted: 16}
	specs := []ProviderSpec{prov("alpha", 6, 4, 3, 3), prov("beta", 4, 4, 2, 2), prov("gamma", 2, 4, 1, 1)}
	admitted := func(burst bool) int {
		h := newComposed(l, specs)
		n := 0
		for i := range 50 {
			id, p := ID(i+1), i%3
			m := (i / 3) % 2
			if !burst {
				if o, _ := h.Arrive(id, p, m, I, t0); o != Rejected {
					n++
				}
				continue
			}
			h.ps[p].Enter(id, Arrival{Model: m, Class: I}, t0)
			h.where[id] = p
			h.report(p, t0)
		}
		if burst {
			h.deliver(t0)
			n = h.Running() + h.Queued()
		}
		return n
	}
	if seq, burst := admitted(false), admitted(true); seq != 16 || burst != seq {
		t.Fatalf("admitted %d one at a time, %d in a burst; want 16 both", seq, burst)
	}
}

// TestManyAwaitingVerdicts: with hundreds of arrivals awaiting their verdicts at once (past
// the point where Report and Verdicts index the lists instead of scanning them), each gets
// exactly one verdict, overloaded past max_admitted, and one still listed as pending in a
// later offer gets none again.
func TestManyAwaitingVerdicts(t *testing.T) {
	for _, n := range []int{3, 40, 600} { // below and far above scanLimit's reach
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			const admitted = 20
			d := NewDispatcher(Limits{MaxRunning: 1, MaxAdmitted: admitted}, 1)
			ids := make([]ID, n)
			for i := range ids {
				ids[i] = ID(1000 + 7*i)
			}
			d.Report(0, Offer{Running: 1, Queued: n, QueueLength: n, Pending: ids})
			vs := d.Verdicts(nil)
			if len(vs) != n {
				t.Fatalf("%d verdicts for %d arrivals", len(vs), n)
			}
			waiting := 0
			for i, v := range vs {
				if v.ID != ids[i] {
					t.Fatalf("verdict %d is for %d, want %d (arrival order)", i, v.ID, ids[i])
				}
				if !v.removes() {
					waiting++
				}
			}
			if want := min(n, admitted-1); waiting != want {
				t.Fatalf("%d may wait, want %d (running 1, max_admitted %d)", waiting, want, admitted)
			}
			// The provider has applied the first half; the rest are still listed.
			rest, kept := ids[n/2:], min(n/2, admitted-1)
			d.Report(0, Offer{Running: 1, Queued: n - n/2, Kept: kept, QueueLength: n, Pending: rest})
			if again := d.Verdicts(nil); len(again) != 0 {
				t.Fatalf("%d verdicts given again for arrivals already judged", len(again))
			}
			// One more arrival: judged alone.
			d.Report(0, Offer{Running: 1, Queued: n - n/2 + 1, Kept: kept, QueueLength: n, Pending: append(slices.Clone(rest), 1)})
			if vs := d.Verdicts(nil); len(vs) != 1 || vs[0].ID != 1 {
				t.Fatalf("verdicts for the one new arrival: %+v", vs)
			}
		})
	}
}
