package breaker

import (
	"math/rand/v2"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// TestLifecycle: five failures open it, Retry-After counts down to the probe, one probe at a
// time, a failed probe doubles the period up to the cap, a successful one closes it.
func TestLifecycle(t *testing.T) {
	b := New(Config{})
	now := t0
	for i := range 4 {
		b.Failure(now, false)
		if b.State(now) != Closed {
			t.Fatalf("open after %d failures", i+1)
		}
	}
	b.Success(now, false) // breaks the run
	for range 4 {
		b.Failure(now, false)
	}
	if b.State(now) != Closed {
		t.Fatal("a success must reset the consecutive count")
	}
	b.Failure(now, false)
	if b.State(now) != Open || b.RetryAfter(now) != 30*time.Second {
		t.Fatalf("after 5 failures: %v, retry after %v", b.State(now), b.RetryAfter(now))
	}
	if ok, _ := b.Allow(now.Add(29 * time.Second)); ok {
		t.Fatal("allowed while open")
	}
	b.Failure(now, false) // a late failure of a call started before: no effect
	period := 30 * time.Second
	for _, want := range []time.Duration{60 * time.Second, 120 * time.Second, 240 * time.Second, 5 * time.Minute, 5 * time.Minute} {
		now = now.Add(period)
		ok, probe := b.Allow(now)
		if !ok || !probe {
			t.Fatalf("no probe at the end of the period: %v %v", ok, probe)
		}
		if ok, _ := b.Allow(now); ok {
			t.Fatal("a second call while the probe is out")
		}
		b.Failure(now, true)
		if got := b.RetryAfter(now); got != want {
			t.Fatalf("after a failed probe: open for %v, want %v", got, want)
		}
		period = want
	}
	now = now.Add(period)
	_, probe := b.Allow(now)
	b.Neutral(probe) // a rate-limited probe says nothing: another may go
	ok, probe := b.Allow(now)
	if !ok || !probe {
		t.Fatal("no new probe after a neutral one")
	}
	b.Success(now, true)
	if b.State(now) != Closed || !b.Since().Equal(now) {
		t.Fatalf("a successful probe must close it: %v since %v", b.State(now), b.Since())
	}
	for range 4 {
		b.Failure(now, false)
	}
	b.Failure(now, false)
	if got := b.RetryAfter(now); got != 30*time.Second {
		t.Errorf("after closing, the period is back to open_for: %v", got)
	}
}

func TestRatio(t *testing.T) {
	b := New(Config{Failures: 100, Ratio: 0.5})
	now := t0
	// 19 calls, 10 failed: below MinCalls, stays closed.
	for i := range 19 {
		if i%2 == 0 {
			b.Failure(now, false)
		} else {
			b.Success(now, false)
		}
	}
	if b.State(now) != Closed {
		t.Fatal("opened with fewer than 20 calls")
	}
	b.Success(now, false) // 20 calls, 10 failed: exactly 0.5 is not over it
	if b.State(now) != Closed {
		t.Fatal("opened at exactly the ratio")
	}
	b.Failure(now, false) // 21 calls, 11 failed
	if b.State(now) != Open {
		t.Fatal("did not open over the ratio")
	}
	// Outcomes older than the window do not count.
	b = New(Config{Failures: 100})
	for range 15 {
		b.Failure(t0, false)
	}
	later := t0.Add(Window * time.Second)
	for range 5 {
		b.Success(later, false)
	}
	b.Failure(later, false)
	if b.State(later) != Closed {
		t.Error("failures from before the window opened it")
	}
}

// refBreaker is the slow model: every outcome since the last close, the window recomputed by
// filtering them.
type refBreaker struct {
	cfg      Config
	outcomes []struct {
		sec    int64
		failed bool
	}
	open          bool
	until         time.Time
	period        time.Duration
	halfOpen, out bool
	runOfFailures int
}

func (m *refBreaker) allow(now time.Time) (bool, bool) {
	switch {
	case !m.open && !m.halfOpen:
		return true, false
	case m.open && now.Before(m.until):
		return false, false
	case m.out:
		return false, false
	}
	m.open, m.halfOpen, m.out = false, true, true
	return true, true
}

func (m *refBreaker) report(now time.Time, failed, probe bool) {
	if probe && m.halfOpen {
		m.halfOpen, m.out = false, false
		if failed {
			m.period = min(2*m.period, MaxOpenFor)
			m.open, m.until = true, now.Add(m.period)
		} else {
			m.outcomes, m.runOfFailures, m.period = nil, 0, m.cfg.OpenFor
		}
		return
	}
	if failed && (m.open || m.halfOpen) {
		return
	}
	m.outcomes = append(m.outcomes, struct {
		sec    int64
		failed bool
	}{now.Unix(), failed})
	if !failed {
		m.runOfFailures = 0
		return
	}
	m.runOfFailures++
	calls, bad := 0, 0
	for _, o := range m.outcomes {
		if o.sec > now.Unix()-Window {
			calls++
			if o.failed {
				bad++
			}
		}
	}
	if m.runOfFailures >= m.cfg.Failures || calls >= MinCalls && float64(bad) > m.cfg.Ratio*float64(calls) {
		m.open, m.until, m.period = true, now.Add(m.cfg.OpenFor), m.cfg.OpenFor
	}
}

// TestAgainstReference drives the Breaker and the model with random outcomes and compares
// every Allow and every state; it also checks that no more than one probe is ever out.
func TestAgainstReference(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 9))
		cfg := Config{Failures: 1 + rng.IntN(6), Ratio: []float64{0.3, 0.5, 0.8}[rng.IntN(3)],
			OpenFor: time.Duration(1+rng.IntN(30)) * time.Second}
		b, m := New(cfg), &refBreaker{cfg: cfg, period: cfg.OpenFor}
		now := t0
		var probes []bool // outstanding calls: whether each is the probe
		for step := range 600 {
			now = now.Add(time.Duration(rng.IntN(1500)) * time.Millisecond)
			if len(probes) == 0 || rng.IntN(2) == 0 {
				ok, probe := b.Allow(now)
				wok, wprobe := m.allow(now)
				if ok != wok || probe != wprobe {
					t.Fatalf("seed %d step %d: Allow = %v,%v; model %v,%v", seed, step, ok, probe, wok, wprobe)
				}
				if ok {
					probes = append(probes, probe)
				}
			} else {
				i := rng.IntN(len(probes))
				probe := probes[i]
				probes = append(probes[:i], probes[i+1:]...)
				switch rng.IntN(5) {
				case 0:
					b.Success(now, probe)
					m.report(now, false, probe)
				case 1:
					b.Neutral(probe)
					if probe && m.halfOpen {
						m.out = false
					}
				default:
					b.Failure(now, probe)
					m.report(now, true, probe)
				}
			}
			n := 0
			for _, p := range probes {
				if p {
					n++
				}
			}
			if n > 1 {
				t.Fatalf("seed %d: %d probes out", seed, n)
			}
			wantOpen := m.open && now.Before(m.until)
			if got := b.State(now) == Open; got != wantOpen {
				t.Fatalf("seed %d step %d: open %v, model %v", seed, step, got, wantOpen)
			}
			if b.RetryAfter(now) > MaxOpenFor {
				t.Fatalf("seed %d: retry after %v beyond the cap", seed, b.RetryAfter(now))
			}
		}
	}
}

// TestOpenedElsewhere: another replica's open breaker opens this one until the same time,
// never shortens an open period, leaves a probe out here unable to close or reopen it, and
// makes a later failed probe double from the longer period.
func TestOpenedElsewhere(t *testing.T) {
	tests := []struct {
		name      string
		setup     func(b *Breaker, now time.Time) // what this replica saw first
		d         time.Duration
		changed   bool
		wantAfter time.Duration // RetryAfter at now
	}{
		{"closed opens until the same time", func(*Breaker, time.Time) {}, 20 * time.Second, true, 20 * time.Second},
		{"open longer here: unchanged", func(b *Breaker, now time.Time) { openHere(b, now) }, 10 * time.Second, false, 30 * time.Second},
		{"open shorter here: lengthened", func(b *Breaker, now time.Time) { openHere(b, now) }, time.Minute, true, time.Minute},
		{"half-open with the probe out: open again", func(b *Breaker, now time.Time) {
			openHere(b, now.Add(-30*time.Second))
			b.Allow(now)
		}, 40 * time.Second, true, 40 * time.Second},
		{"zero: nothing", func(*Breaker, time.Time) {}, 0, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := New(Config{})
			tt.setup(b, t0)
			if got := b.OpenedElsewhere(t0, tt.d); got != tt.changed {
				t.Fatalf("OpenedElsewhere(%s) = %v, want %v", tt.d, got, tt.changed)
			}
			if got := b.RetryAfter(t0); got != tt.wantAfter {
				t.Errorf("open for %s, want %s", got, tt.wantAfter)
			}
		})
	}

	b := New(Config{})
	openHere(b, t0.Add(-30*time.Second))
	if ok, probe := b.Allow(t0); !ok || !probe {
		t.Fatal("no probe at the end of the period")
	}
	b.OpenedElsewhere(t0, time.Minute)
	b.Success(t0, true) // the probe out here ends well: it no longer closes the breaker
	if b.State(t0) != Open {
		t.Fatalf("a probe's success closed a breaker another replica opened since: %v", b.State(t0))
	}
	b.Failure(t0, true) // nor does its failure reopen it
	if got := b.RetryAfter(t0); got != time.Minute {
		t.Fatalf("a probe's failure changed a breaker another replica opened since: open for %s", got)
	}
	now := t0.Add(time.Minute)
	if ok, probe := b.Allow(now); !ok || !probe {
		t.Fatal("no probe here at the time the other replica's breaker probes")
	}
	b.Failure(now, true)
	if got := b.RetryAfter(now); got != 2*time.Minute {
		t.Errorf("a failed probe after the other replica's minute opens for %s, want double that minute", got)
	}
}

// openHere opens b at now with five failures (open_for 30s).
func openHere(b *Breaker, now time.Time) {
	for range DefaultFailures {
		b.Failure(now, false)
	}
}
