package health

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/tollgate/tollgate/actors/policy/breaker"
	"github.com/tollgate/tollgate/actors/policy/capacity"
	"github.com/tollgate/tollgate/actors/policy/keys"
	"github.com/tollgate/tollgate/providers/llm"
)

// show prints effects with their pointers followed, for a failure message.
func show(e Effects) string {
	b, _ := json.Marshal(e)
	return string(b)
}

// copyOf is a deep copy of h, to compare against after a Record.
func copyOf(h *State) *State {
	c := *h
	c.rings = make([]*keys.Ring, len(h.rings))
	for i, r := range h.rings {
		c.rings[i] = r.Clone()
	}
	br, bu, l := *h.breaker, *h.budget, *h.lanes
	c.breaker, c.budget, c.lanes = &br, &bu, &l
	c.models = map[int]*capacity.Lanes{}
	for m, ml := range h.models {
		v := *ml
		c.models[m] = &v
	}
	c.refused = map[int]string{}
	for pl, s := range h.refused {
		c.refused[pl] = s
	}
	c.scratch = keys.Ring{} // storage for the next change, not state
	return &c
}

// TestRecordPanicLeavesStateAsItWas: a panic in the middle of Record, after it has worked
// out every change and before it assigns them, leaves the health exactly as it was; the same
// outcome without the panic changes it (so the comparison can fail).
func TestRecordPanicLeavesStateAsItWas(t *testing.T) {
	for _, tc := range []struct {
		name string
		prep func(h *State, now time.Time)
		o    Outcome
	}{
		{"the breaker opens", func(h *State, now time.Time) {
			for range breaker.DefaultFailures - 1 {
				h.Record(Outcome{Kind: Failed, Err: down}, now)
			}
		}, Outcome{Kind: Failed, Err: down}},
		{"a key rests and the lanes halve", nil, Outcome{Kind: Failed, Err: rateLimited, Key: 1, Running: 4, Started: t0}},
		{"a key is set aside", nil, Outcome{Kind: Failed, Err: refused, Key: 0}},
		{"a stated limit", nil, Outcome{Kind: Failed, Err: stated, Model: 1}},
		{"the probe closes the breaker", probing, Outcome{Kind: Succeeded, Probe: true,
			Quota: &llm.Quota{RequestsRemaining: 0, RequestsReset: time.Minute}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := New(spec(), t0.Add(-time.Hour))
			if tc.prep != nil {
				tc.prep(h, t0)
			}
			before := copyOf(h)
			func() {
				testHookMidRecord = func() { panic("injected") }
				defer func() {
					testHookMidRecord = nil
					if r := recover(); r != "injected" {
						t.Fatalf("recovered %v, want the injected panic", r)
					}
				}()
				h.Record(tc.o, t0)
			}()
			if !reflect.DeepEqual(copyOf(h), before) {
				t.Fatal("the health changed in a Record that panicked")
			}
			h.Record(tc.o, t0)
			if reflect.DeepEqual(copyOf(h), before) {
				t.Fatal("the outcome changed nothing without the panic: the test proves nothing")
			}
		})
	}
}
