package keys

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestScopeOf(t *testing.T) {
	tests := []struct {
		status     int
		keyInvalid bool
		want       Scope
	}{
		{401, false, WholeKey},
		{401, true, WholeKey},
		{403, false, OneModel}, // the key may not use this model
		{403, true, WholeKey},  // the backend said the key itself is invalid or disabled
		{400, true, WholeKey},  // Gemini's API_KEY_INVALID
		{200, false, WholeKey}, // a refusal inside a 200 (Qianfan)
		{0, false, WholeKey},   // a CLI's login error
	}
	for _, tt := range tests {
		if got := ScopeOf(tt.status, tt.keyInvalid); got != tt.want {
			t.Errorf("ScopeOf(%d, %v) = %v, want %v", tt.status, tt.keyInvalid, got, tt.want)
		}
	}
}

// TestSetAsideSteps walks one ring of two keys and models 0 and 1 through the rule's steps;
// each step's states are those of key 0 for model 0, model 1 and the key alone, after it.
func TestSetAsideSteps(t *testing.T) {
	const wait = time.Minute
	r := New(2, Config{MaxCooldown: wait})
	type step struct {
		name  string
		at    time.Duration
		do    func(now time.Time) Change
		want  Change
		state [3]State // model 0, model 1, the key
	}
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	began := func(now time.Time) Change {
		if !r.Began(0, 0, now) {
			t.Fatalf("at %v: the call is not the probe", now.Sub(t0))
		}
		return Change{}
	}
	steps := []step{
		{"403 for model 0", 0, func(now time.Time) Change { return r.Refused(0, 0, OneModel, "no access", false, now) },
			Change{SetAside: true, Scope: OneModel, Until: at(wait)}, [3]State{SetAside, Ready, Ready}},
		{"a late 403 of a call that was not the probe", time.Second,
			func(now time.Time) Change { return r.Refused(0, 0, OneModel, "no access", false, now) },
			Change{Scope: OneModel, Until: at(wait)}, [3]State{SetAside, Ready, Ready}},
		{"re-probe due", wait, func(time.Time) Change { return Change{} }, Change{}, [3]State{Ready, Ready, Ready}},
		{"the probe starts", wait, began, Change{}, [3]State{SetAside, Ready, Ready}},
		{"the probe is refused: twice the wait", wait + time.Second,
			func(now time.Time) Change { return r.Refused(0, 0, OneModel, "no access", true, now) },
			Change{Again: true, Scope: OneModel, Until: at(wait + time.Second + 2*wait)}, [3]State{SetAside, Ready, Ready}},
		{"the second probe", 3*wait + time.Second, began, Change{}, [3]State{SetAside, Ready, Ready}},
		{"it ends saying nothing: the next call probes", 3*wait + 2*time.Second,
			func(time.Time) Change { r.ProbeEnded(0, 0); return Change{} }, Change{}, [3]State{Ready, Ready, Ready}},
		{"the third probe", 3*wait + 2*time.Second, began, Change{}, [3]State{SetAside, Ready, Ready}},
		{"it succeeds", 3*wait + 3*time.Second, func(time.Time) Change { return r.ProbeSucceeded(0, 0) },
			Change{RestoredModel: true}, [3]State{Ready, Ready, Ready}},
		{"401: the key for every model", 4 * wait, func(now time.Time) Change { return r.Refused(0, 1, WholeKey, "bad key", false, now) },
			Change{SetAside: true, Scope: WholeKey, Until: at(5 * wait)}, [3]State{SetAside, SetAside, SetAside}},
		{"its probe, for model 1", 5 * wait, func(now time.Time) Change {
			if !r.Began(0, 1, now) {
				t.Fatal("not the probe")
			}
			return Change{}
		}, Change{}, [3]State{SetAside, SetAside, SetAside}},
		{"answered 403: the key is back, the pair set aside", 5*wait + time.Second,
			func(now time.Time) Change { return r.Refused(0, 1, OneModel, "no access", true, now) },
			Change{SetAside: true, Scope: OneModel, Until: at(6*wait + time.Second), RestoredKey: true}, [3]State{Ready, SetAside, Ready}},
	}
	for _, st := range steps {
		now := at(st.at)
		if got := st.do(now); got != st.want {
			t.Fatalf("%s: change %+v, want %+v", st.name, got, st.want)
		}
		got := [3]State{r.State(0, 0, now), r.State(0, 1, now), r.State(0, -1, now)}
		if got != st.state {
			t.Fatalf("%s: states %v, want %v", st.name, got, st.state)
		}
		if s := r.State(1, 0, now); s != Ready {
			t.Fatalf("%s: key 1 is %v: another key's refusals never touch it", st.name, s)
		}
	}
	if snap := r.Snapshot(at(5*wait + 2*time.Second)); len(snap[0].Models) != 1 || snap[0].Models[0].Model != 1 ||
		snap[0].Models[0].Reason != "no access" || snap[0].SetAside != nil || snap[0].State != "ready" {
		t.Errorf("snapshot %+v", snap[0])
	}
}

// TestSetAsideWaitDoubles: each failed probe doubles the wait, up to MaxSetAside, and a
// success starts the next set-aside from MaxCooldown again.
func TestSetAsideWaitDoubles(t *testing.T) {
	r := New(1, Config{MaxCooldown: 5 * time.Minute})
	now := t0
	ch := r.Refused(0, -1, WholeKey, "401", false, now)
	var waits []time.Duration
	for range 7 {
		waits = append(waits, ch.Until.Sub(now))
		now = ch.Until
		if !r.Began(0, -1, now) {
			t.Fatal("not the probe")
		}
		ch = r.Refused(0, -1, WholeKey, "401", true, now)
	}
	want := []time.Duration{5, 10, 20, 40, 60, 60, 60}
	for i, w := range want {
		if waits[i] != w*time.Minute {
			t.Fatalf("waits %v, want %v minutes", waits, want)
		}
	}
	now = ch.Until
	r.Began(0, -1, now)
	if ch := r.ProbeSucceeded(0, -1); !ch.RestoredKey || r.AnySetAside() {
		t.Fatalf("success: %+v", ch)
	}
	if ch := r.Refused(0, -1, WholeKey, "401", false, now); ch.Until.Sub(now) != 5*time.Minute || !ch.SetAside {
		t.Errorf("after a success, a new refusal waits MaxCooldown: %+v", ch)
	}
}

// refAside is the slow model of one set-aside: its re-probe time, wait and probe.
type refAside struct {
	until   time.Time
	wait    time.Duration
	probing bool
}

// TestSetAsideAgainstReference drives a ring and a map of set-asides by (key, model), model
// -1 the key's own, with random refusals, probes and their ends, and compares every key's
// state for every model after each step. It also checks the bounds: no wait below
// MaxCooldown or above MaxSetAside, and no probe of a key or pair while one is out.
func TestSetAsideAgainstReference(t *testing.T) {
	const models = 3
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 11))
		n := 1 + rng.IntN(3)
		cfg := Config{MaxCooldown: time.Duration(1+rng.IntN(20)) * time.Minute}
		r := New(n, cfg)
		ref := map[[2]int]*refAside{}
		probes := map[[2]int]bool{} // (key, model) calls that Began called the probe
		holds := func(a *refAside, now time.Time) bool { return a != nil && (a.probing || now.Before(a.until)) }
		now := t0
		for step := range 300 {
			now = now.Add(time.Duration(rng.IntN(40)) * time.Minute)
			i, m := rng.IntN(n), rng.IntN(models)
			k := [2]int{i, m}
			switch op := rng.IntN(6); op {
			case 0, 1: // a refusal, maybe of the probe
				scope := Scope(rng.IntN(2))
				probe := probes[k]
				delete(probes, k)
				r.Refused(i, m, scope, "refused", probe, now)
				refRefuse(ref, i, m, scope, probe, now, cfg.MaxCooldown)
			case 2: // a call starts
				if r.State(i, m, now) != Ready {
					continue
				}
				got := r.Began(i, m, now)
				want := false
				for _, kk := range [][2]int{{i, -1}, k} {
					if a := ref[kk]; a != nil && !a.probing && !now.Before(a.until) {
						a.probing, want = true, true
					}
				}
				if got != want {
					t.Fatalf("seed %d step %d: Began(%d, %d) = %v, model %v", seed, step, i, m, got, want)
				}
				if got {
					probes[k] = true
				}
			case 3: // a probe succeeds
				if probes[k] {
					delete(probes, k)
					r.ProbeSucceeded(i, m)
					for _, kk := range [][2]int{{i, -1}, k} {
						if a := ref[kk]; a != nil && a.probing {
							delete(ref, kk)
						}
					}
				}
			default: // a probe ends saying nothing
				if probes[k] {
					delete(probes, k)
					r.ProbeEnded(i, m)
					for _, kk := range [][2]int{{i, -1}, k} {
						if a := ref[kk]; a != nil {
							a.probing = false
						}
					}
				}
			}
			for kk, a := range ref {
				if a.wait < cfg.MaxCooldown || a.wait > max(MaxSetAside, cfg.MaxCooldown) {
					t.Fatalf("seed %d step %d: %v waits %v", seed, step, kk, a.wait)
				}
			}
			for i := range n {
				for m := -1; m < models; m++ {
					want := Ready
					if holds(ref[[2]int{i, -1}], now) || m >= 0 && holds(ref[[2]int{i, m}], now) {
						want = SetAside
					}
					if got := r.State(i, m, now); got != want {
						t.Fatalf("seed %d step %d: key %d model %d is %v, model says %v", seed, step, i, m, got, want)
					}
				}
			}
		}
	}
}

// refRefuse is the rule of Refused on the model's map, written out case by case.
func refRefuse(ref map[[2]int]*refAside, i, m int, scope Scope, probe bool, now time.Time, first time.Duration) {
	keyA, pairA := ref[[2]int{i, -1}], ref[[2]int{i, m}]
	target := [2]int{i, -1}
	if scope == OneModel {
		target = [2]int{i, m}
		if probe && keyA != nil && keyA.probing {
			delete(ref, [2]int{i, -1}) // the key authenticates again
		}
	} else if probe && pairA != nil && pairA.probing {
		pairA.probing = false
	}
	a := ref[target]
	switch {
	case a == nil:
		ref[target] = &refAside{until: now.Add(first), wait: first}
	case probe && a.probing:
		a.wait = min(2*a.wait, max(MaxSetAside, first))
		a.until, a.probing = now.Add(a.wait), false
	}
}

// TestAllRefusedWhileProbing: every key set aside is all refused (502 at once) until a
// re-probe is due; while the probe is out the calls wait for its verdict (not all refused);
// a refused probe makes them all refused again.
func TestAllRefusedWhileProbing(t *testing.T) {
	r := New(1, Config{MaxCooldown: time.Minute})
	due := t0.Add(time.Minute)
	r.Refused(0, 0, OneModel, "403", false, t0)
	steps := []struct {
		name string
		at   time.Time
		do   func(now time.Time)
		want bool
	}{
		{"set aside", t0, func(time.Time) {}, true},
		{"another model", t0, func(time.Time) {}, false}, // checked for model 1 below
		{"re-probe due", due, func(time.Time) {}, false},
		{"probe out", due, func(now time.Time) { r.Began(0, 0, now) }, false},
		{"probe refused", due.Add(time.Second), func(now time.Time) { r.Refused(0, 0, OneModel, "403", true, now) }, true},
	}
	for _, st := range steps {
		st.do(st.at)
		m := 0
		if st.name == "another model" {
			m = 1
		}
		if got := r.AllRefused(m, st.at); got != st.want {
			t.Errorf("%s: AllRefused = %v, want %v", st.name, got, st.want)
		}
	}
}
