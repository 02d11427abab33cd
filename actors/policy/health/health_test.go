package health

import (
	"reflect"
	"testing"
	"time"

	"github.com/tollgate/tollgate/actors/policy/breaker"
	"github.com/tollgate/tollgate/actors/policy/capacity"
	"github.com/tollgate/tollgate/actors/policy/keys"
	"github.com/tollgate/tollgate/actors/policy/retry"
	"github.com/tollgate/tollgate/providers/llm"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// spec is a provider of two keys and four lanes, with model 1 keeping keys of its own.
func spec() Spec {
	return Spec{Lanes: 4, Pool: Pool{IDs: []string{"a", "b"}, Keyed: true},
		Models: []Model{{Lanes: 4}, {OwnKeys: true, Lanes: 2, Pool: Pool{IDs: []string{"m"}, Keyed: true}}}}
}

var (
	rateLimited = &llm.Error{Kind: llm.KindUpstreamRateLimited, RetryAfter: 20 * time.Second}
	stated      = &llm.Error{Kind: llm.KindUpstreamRateLimited, StatedLimit: 2}
	refused     = &llm.Error{Kind: llm.KindUpstreamAuth, UpstreamStatus: 401, Message: "invalid key"}
	down        = &llm.Error{Kind: llm.KindUpstream, UpstreamStatus: 503}
)

// openBreaker fails five calls: the default breaker opens.
func openBreaker(h *State, now time.Time) {
	for range breaker.DefaultFailures {
		h.Record(Outcome{Kind: Failed, Err: down}, now)
	}
}

// probing opens the breaker and lets its half-open probe start once the period is over.
func probing(h *State, now time.Time) {
	openBreaker(h, now.Add(-breaker.DefaultOpenFor))
	if ok, probe := h.Allow(now); !ok || !probe {
		panic("no probe at the end of the open period")
	}
}

func TestRecord(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spec  func(*Spec)
		prep  func(h *State, now time.Time)
		o     Outcome
		want  Effects
		check func(t *testing.T, h *State, now time.Time)
	}{{
		name: "a rate limit rests the key for the backend's hint",
		o:    Outcome{Kind: Failed, Err: rateLimited, Key: 1, Running: 1},
		want: Effects{Cooled: &Cooldown{Pool: 0, Key: 1, For: 20 * time.Second}, Recheck: 0},
		check: func(t *testing.T, h *State, now time.Time) {
			if st := h.Ring(0).State(1, 0, now); st != keys.Cooling {
				t.Errorf("key b is %v, want cooling", st)
			}
		},
	}, {
		name: "a rate limit on a model's own key rests that pool's key",
		o:    Outcome{Kind: Failed, Err: rateLimited, Model: 1, Key: 0, Running: 1},
		want: Effects{Cooled: &Cooldown{Pool: 1, Key: 0, For: 20 * time.Second}, Recheck: 1},
	}, {
		name: "a stated limit teaches the lanes and sends the call back, no key rests",
		o:    Outcome{Kind: Failed, Err: stated, Key: 0},
		want: Effects{CapacityRefused: true, Recheck: -1,
			Lanes: &LanesChange{Model: -1, Change: capacity.Change{From: 4, To: 2, Reason: capacity.StatedLimit, At: t0},
				Signal: "the backend stated a limit of 2 concurrent calls"}},
	}, {
		name: "with learned lanes off a stated limit is a rate limit",
		spec: func(s *Spec) { s.Fixed = true },
		o:    Outcome{Kind: Failed, Err: stated, Key: 0},
		want: Effects{Cooled: &Cooldown{Pool: 0, Key: 0, For: keys.DefaultCooldown}, Recheck: 0},
	}, {
		name: "an unexplained rate limit with every lane busy halves the lanes",
		o:    Outcome{Kind: Failed, Err: rateLimited, Key: 0, Running: 4, Started: t0},
		want: Effects{Cooled: &Cooldown{Pool: 0, Key: 0, For: 20 * time.Second}, Recheck: 0,
			Lanes: &LanesChange{Model: -1, Change: capacity.Change{From: 4, To: 2, Reason: capacity.RateLimited, At: t0},
				Signal: "an unexplained rate limit while 4 calls ran"}},
	}, {
		name: "a key of before a reload names no key of now: nothing rests",
		o:    Outcome{Kind: Failed, Err: rateLimited, Key: 1, StaleKeys: true, Running: 1},
		want: Effects{Recheck: -1},
	}, {
		name: "a refused key is set aside and the backend's words kept",
		o:    Outcome{Kind: Failed, Err: refused, Key: 0},
		want: Effects{Recheck: 0, Key: &KeyChange{Key: 0, Change: keys.Change{SetAside: true, Scope: keys.WholeKey,
			Until: t0.Add(keys.DefaultMaxCooldown)}}},
		check: func(t *testing.T, h *State, now time.Time) {
			if got := h.Refused(0); got != "invalid key" {
				t.Errorf("Refused(0) = %q, want the backend's message", got)
			}
		},
	}, {
		name: "the fifth provider-down answer opens the breaker",
		prep: func(h *State, now time.Time) {
			for range breaker.DefaultFailures - 1 {
				h.Record(Outcome{Kind: Failed, Err: down}, now)
			}
		},
		o:    Outcome{Kind: Failed, Err: down},
		want: Effects{Recheck: -1, SetCap: true, StartCap: 0, Opened: true},
	}, {
		name: "a provider-down answer of an open breaker opens nothing new",
		prep: openBreaker,
		o:    Outcome{Kind: Failed, Err: down},
		want: Effects{Recheck: -1, SetCap: true, StartCap: 0},
	}, {
		name: "the probe's success closes the breaker",
		prep: probing,
		o:    Outcome{Kind: Succeeded, Probe: true},
		want: Effects{Recheck: -1, ProbeOver: true, SetCap: true, StartCap: -1, Closed: true},
	}, {
		name: "the probe's failure opens it again",
		prep: probing,
		o:    Outcome{Kind: Failed, Err: down, Probe: true},
		want: Effects{Recheck: -1, ProbeOver: true, SetCap: true, StartCap: 0, Opened: true},
	}, {
		name: "a neutral probe lets the next probe go",
		prep: probing,
		o:    Outcome{Kind: Neutral, Probe: true},
		want: Effects{Recheck: -1, ProbeOver: true, SetCap: true, StartCap: 1},
	}, {
		name: "a call handed back before it ran gives up the breaker's probe, not its key's",
		prep: probing,
		o:    Outcome{Kind: NotRun, Probe: true, KeyProbe: true},
		want: Effects{Recheck: -1, ProbeOver: true, SetCap: true, StartCap: 1},
	}, {
		name: "a success with every lane busy says nothing until the probe count",
		o:    Outcome{Kind: Succeeded, Busy: true},
		want: Effects{Recheck: -1},
	}, {
		name: "a remaining count of 0 holds the lanes",
		o:    Outcome{Kind: Succeeded, Quota: &llm.Quota{RequestsRemaining: 0, RequestsReset: time.Minute}},
		want: Effects{Recheck: -1},
		check: func(t *testing.T, h *State, now time.Time) {
			if !h.LanesSnapshot(-1, now).Held {
				t.Error("the lanes are not held after a remaining count of 0")
			}
		},
	}, {
		name: "a settled call's key probe ends",
		prep: func(h *State, now time.Time) {
			h.Record(Outcome{Kind: Failed, Err: refused, Key: 0}, now.Add(-keys.DefaultMaxCooldown))
			if !h.Began(0, 0, true, now) {
				panic("the set-aside key's re-probe did not begin")
			}
		},
		o:    Outcome{Kind: Settled, Key: 0, KeyProbe: true, ProbeKey: 0},
		want: Effects{Recheck: -1, KeyProbeOver: true},
		check: func(t *testing.T, h *State, now time.Time) {
			if !h.KeyProbe(0, 0, now) {
				t.Error("no new probe of the key after the last one ended")
			}
		},
	}, {
		name: "a key probe's success restores the key",
		prep: func(h *State, now time.Time) {
			h.Record(Outcome{Kind: Failed, Err: refused, Key: 1}, now.Add(-keys.DefaultMaxCooldown))
			h.Began(0, 1, true, now)
		},
		o:    Outcome{Kind: Succeeded, Key: 1, KeyProbe: true, ProbeKey: 1},
		want: Effects{Recheck: -1, KeyProbeOver: true, Key: &KeyChange{Key: 1, Change: keys.Change{RestoredKey: true, Scope: keys.WholeKey}}},
		check: func(t *testing.T, h *State, now time.Time) {
			if st := h.Ring(0).State(1, 0, now); st != keys.Ready {
				t.Errorf("key b is %v after its probe succeeded, want ready", st)
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			s := spec()
			if tc.spec != nil {
				tc.spec(&s)
			}
			h := New(s, t0.Add(-time.Hour))
			if tc.prep != nil {
				tc.prep(h, t0)
			}
			got := h.Record(tc.o, t0)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Record:\n got %s\nwant %s", show(got), show(tc.want))
			}
			if tc.check != nil {
				tc.check(t, h, t0)
			}
		})
	}
}

func TestRetry(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec func(*Spec)
		prep func(h *State, now time.Time)
		at   retry.Attempt
		m    int
		want Verdict
	}{
		{"no retries configured", nil, nil, retry.Attempt{Class: retry.Down, Made: 1}, 0, Final},
		{"a provider down is retried", func(s *Spec) { s.Retries = 2 }, nil, retry.Attempt{Class: retry.Down, Made: 1}, 0, Retry},
		{"not past the retries", func(s *Spec) { s.Retries = 1 }, nil, retry.Attempt{Class: retry.Down, Made: 2}, 0, Final},
		{"an open breaker starts nothing", func(s *Spec) { s.Retries = 2 }, openBreaker, retry.Attempt{Class: retry.Down, Made: 1}, 0, BreakerOpen},
		{"the budget's floor spent", func(s *Spec) { s.Retries = 2 }, func(h *State, now time.Time) {
			for h.budget.Retry(now) {
			}
		}, retry.Attempt{Class: retry.Down, Made: 1}, 0, BudgetSpent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := spec()
			if tc.spec != nil {
				tc.spec(&s)
			}
			h := New(s, t0)
			if tc.prep != nil {
				tc.prep(h, t0)
			}
			if _, got := h.Retry(tc.at, tc.m, 0.5, t0); got != tc.want {
				t.Errorf("verdict %d, want %d", got, tc.want)
			}
		})
	}
}

// TestBegan: a first attempt earns the retry budget a call, a retry does not; an attempt on
// a set-aside key whose re-probe is due is that key's probe, and only one at a time.
func TestBegan(t *testing.T) {
	h := New(spec(), t0)
	h.Record(Outcome{Kind: Failed, Err: refused, Key: 0}, t0)
	due := t0.Add(keys.DefaultMaxCooldown)
	if !h.Began(0, 0, true, due) {
		t.Fatal("the attempt on the due key is not its probe")
	}
	if h.Began(0, 0, true, due) {
		t.Fatal("a second probe of the key while the first is out")
	}
	if h.Began(0, 1, false, due) {
		t.Fatal("an attempt on a ready key is a probe")
	}
	if h.Began(0, 5, true, due) {
		t.Fatal("a key out of range is a probe")
	}
	h = New(spec(), t0)
	budget := *h.budget
	h.Began(0, 0, false, t0)
	if !reflect.DeepEqual(*h.budget, budget) {
		t.Error("a retry's start earned the budget a call")
	}
	h.Began(0, 0, true, t0)
	if reflect.DeepEqual(*h.budget, budget) {
		t.Error("a first attempt earned the budget nothing")
	}
}
