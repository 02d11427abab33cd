package policy

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// The table tests are scripts of steps run against one gate with a test clock.

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

const (
	I = llm.Interactive
	N = llm.Normal
	B = llm.Background
)

type harness struct {
	t   *testing.T
	g   *composed
	now time.Time
}

type step struct {
	name string
	do   func(h *harness) error
}

type script struct {
	name      string
	limits    Limits
	providers []ProviderSpec
	steps     []step
}

func (s script) run(t *testing.T) {
	t.Helper()
	t.Run(s.name, func(t *testing.T) {
		h := &harness{t: t, g: newComposed(s.limits, s.providers), now: t0}
		for i, st := range s.steps {
			if err := st.do(h); err != nil {
				t.Fatalf("step %d (%s): %v", i, st.name, err)
			}
		}
	})
}

// prov builds a provider spec with the given lanes, queue length and model lanes.
func prov(name string, lanes, queue int, modelLanes ...int) ProviderSpec {
	ps := ProviderSpec{Name: name, Lanes: lanes, QueueLength: queue, QueueTimeout: 10 * time.Second}
	for i, ml := range modelLanes {
		ps.Models = append(ps.Models, ModelSpec{Name: fmt.Sprintf("%s-m%d", name, i), Lanes: ml})
	}
	return ps
}

// want is "started", "queued" or a rejection's SPEC code.
func arrive(id ID, p, m int, prio llm.Priority, want string) step {
	return step{fmt.Sprintf("arrive %d p%d m%d %s → %s", id, p, m, prio, want), func(h *harness) error {
		o, k := h.g.Arrive(id, p, m, prio, h.now)
		got := o.String()
		if o == Rejected {
			got = k.String()
		}
		if got != want {
			return fmt.Errorf("got %s, want %s", got, want)
		}
		return nil
	}}
}

func finish(id ID) step {
	return step{fmt.Sprintf("finish %d", id), func(h *harness) error {
		if !h.g.Finish(id, h.now) {
			return fmt.Errorf("Finish(%d) = false, want true", id)
		}
		return nil
	}}
}

func finishFails(id ID) step {
	return step{fmt.Sprintf("finish %d fails", id), func(h *harness) error {
		if h.g.Finish(id, h.now) {
			return fmt.Errorf("Finish(%d) = true, want false", id)
		}
		return nil
	}}
}

func cancel(id ID, want bool) step {
	return step{fmt.Sprintf("cancel %d → %v", id, want), func(h *harness) error {
		if got := h.g.Cancel(id, h.now); got != want {
			return fmt.Errorf("Cancel(%d) = %v, want %v", id, got, want)
		}
		return nil
	}}
}

func ids(xs []ID) []ID {
	if xs == nil {
		return []ID{}
	}
	return xs
}

// dispatch expects exactly want, in that order, to have started since the last check
// (other than arrivals reported as started), counting a wake-up of every provider at now.
func dispatch(want ...ID) step {
	return step{fmt.Sprintf("dispatch → %v", want), func(h *harness) error {
		if got := h.g.Dispatch(h.now); !slices.Equal(ids(got), ids(want)) {
			return fmt.Errorf("started %v, want %v", got, want)
		}
		return nil
	}}
}

// finishThen finishes id and expects the following Dispatch to start want.
func finishThen(id ID, want ...ID) step {
	f, d := finish(id), dispatch(want...)
	return step{f.name + ", " + d.name, func(h *harness) error {
		if err := f.do(h); err != nil {
			return err
		}
		return d.do(h)
	}}
}

func expire(want ...ID) step {
	return step{fmt.Sprintf("expire → %v", want), func(h *harness) error {
		if got := h.g.Expire(h.now, nil); !slices.Equal(ids(got), ids(want)) {
			return fmt.Errorf("expired %v, want %v", got, want)
		}
		return nil
	}}
}

func advance(d time.Duration) step {
	return step{fmt.Sprintf("advance %v", d), func(h *harness) error {
		h.now = h.now.Add(d)
		return nil
	}}
}

func lanes(p, n int) step {
	return step{fmt.Sprintf("effective lanes p%d = %d", p, n), func(h *harness) error {
		h.g.SetEffectiveLanes(p, n, h.now)
		return nil
	}}
}

// wake expects NextWake to be t0+d, or none when d < 0.
func wake(d time.Duration) step {
	return step{fmt.Sprintf("next wake t0+%v", d), func(h *harness) error {
		at, ok := h.g.NextWake(h.now)
		switch {
		case d < 0 && ok:
			return fmt.Errorf("NextWake = t0+%v, want none", at.Sub(t0))
		case d >= 0 && !ok:
			return fmt.Errorf("NextWake = none, want t0+%v", d)
		case d >= 0 && !at.Equal(t0.Add(d)):
			return fmt.Errorf("NextWake = t0+%v, want t0+%v", at.Sub(t0), d)
		}
		return nil
	}}
}

// counts expects the gate's totals.
func counts(running, queued int) step {
	return step{fmt.Sprintf("running %d queued %d", running, queued), func(h *harness) error {
		if r, q := h.g.Running(), h.g.Queued(); r != running || q != queued {
			return fmt.Errorf("running %d queued %d, want %d and %d", r, q, running, queued)
		}
		return nil
	}}
}

func check(name string, f func(h *harness) error) step { return step{name, f} }
