package affinity

import (
	"fmt"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)

// TestBindingSteps walks one table (TTL 10m, at most 2 bindings) through the rule's steps.
func TestBindingSteps(t *testing.T) {
	tb := New(Config{TTL: 10 * time.Minute, Max: 2})
	a0 := Binding{Provider: "p", Key: 0, Model: "p/m"}
	a1 := Binding{Provider: "p", Key: 1, Model: "p/m"}
	q0 := Binding{Provider: "q", Key: 0, Model: "q/m"}
	type step struct {
		name string
		at   time.Duration
		conv string
		bind Binding
		want Outcome
		// then: the bindings live after the step, by conversation
		then map[string]Binding
	}
	steps := []step{
		{"no conversation binds nothing", 0, "", a0, None, map[string]Binding{}},
		{"a first success binds", 0, "A", a0, Made, map[string]Binding{"A": a0}},
		{"the same key again is a hit", time.Minute, "A", a0, Hit, map[string]Binding{"A": a0}},
		{"another key (the bound one cooled) moves it", 2 * time.Minute, "A", a1, Moved, map[string]Binding{"A": a1}},
		{"another provider or model moves it too", 3 * time.Minute, "A", q0, Moved, map[string]Binding{"A": q0}},
		{"a second conversation", 4 * time.Minute, "B", a0, Made, map[string]Binding{"A": q0, "B": a0}},
		{"the TTL counts from the last use: A is live at 12m", 12 * time.Minute, "B", a0, Hit, map[string]Binding{"A": q0, "B": a0}},
		{"A expired at 13m: its next success is new", 13 * time.Minute, "A", a1, Made, map[string]Binding{"A": a1, "B": a0}},
		{"a third conversation evicts the least recently used (B)", 14 * time.Minute, "C", q0, Made, map[string]Binding{"A": a1, "C": q0}},
		{"B's next success is new", 15 * time.Minute, "B", a0, Made, map[string]Binding{"B": a0, "C": q0}},
	}
	for _, s := range steps {
		now := t0.Add(s.at)
		if got := tb.Bind(s.conv, s.bind, now); got != s.want {
			t.Fatalf("%s: Bind = %v, want %v", s.name, got, s.want)
		}
		for _, conv := range []string{"A", "B", "C"} {
			got, ok := tb.Lookup(conv, now)
			want, wok := s.then[conv]
			if ok != wok || got != want {
				t.Fatalf("%s: Lookup(%s) = %+v, %v; want %+v, %v", s.name, conv, got, ok, want, wok)
			}
		}
	}
}

func TestLookupExpiresExactlyAtTTL(t *testing.T) {
	tb := New(Config{TTL: time.Minute})
	tb.Bind("A", Binding{Provider: "p"}, t0)
	if _, ok := tb.Lookup("A", t0.Add(time.Minute-time.Nanosecond)); !ok {
		t.Fatal("expired before its TTL")
	}
	if _, ok := tb.Lookup("A", t0.Add(time.Minute)); ok {
		t.Fatal("live at its TTL")
	}
	if tb.Len() != 0 {
		t.Fatalf("Len %d after expiry, want 0: Lookup forgets what expired", tb.Len())
	}
}

func TestCountsPerProvider(t *testing.T) {
	tb := New(Config{TTL: time.Minute})
	tb.Bind("A", Binding{Provider: "p"}, t0)
	tb.Bind("B", Binding{Provider: "p", Key: 1}, t0.Add(30*time.Second))
	tb.Bind("C", Binding{Provider: "q"}, t0.Add(30*time.Second))
	if got := tb.Counts(t0.Add(45 * time.Second)); fmt.Sprint(got) != "map[p:2 q:1]" {
		t.Errorf("counts at 45s %v, want p:2 q:1", got)
	}
	if got := tb.Counts(t0.Add(time.Minute)); fmt.Sprint(got) != "map[p:1 q:1]" || tb.Len() != 2 {
		t.Errorf("counts at 1m %v (len %d), want p:1 q:1: A expired and is forgotten", got, tb.Len())
	}
}

func TestDefaultsAndBound(t *testing.T) {
	tb := New(Config{})
	if tb.ttl != DefaultTTL || tb.max != DefaultMax {
		t.Fatalf("defaults ttl %v max %d", tb.ttl, tb.max)
	}
	tb = New(Config{Max: 100})
	for i := range 1000 {
		tb.Bind(fmt.Sprint(i), Binding{Key: i}, t0)
	}
	if tb.Len() != 100 {
		t.Fatalf("Len %d, want the cap 100", tb.Len())
	}
	if _, ok := tb.Lookup("899", t0); ok {
		t.Error("an old binding survived the cap")
	}
	if b, ok := tb.Lookup("999", t0); !ok || b.Key != 999 {
		t.Error("the newest binding is gone")
	}
}

// TestAdopt: a binding made elsewhere is taken, with its own last use (it expires TTL after
// that, not after the adoption), unless the table has a live one of its own as new or
// newer, or it expired;
// the conversation's next success on the adopted key is a hit.
func TestAdopt(t *testing.T) {
	a0 := Binding{Provider: "p", Key: 0, Model: "p/m"}
	a1 := Binding{Provider: "p", Key: 1, Model: "p/m"}
	tests := []struct {
		name  string
		own   bool // the table bound "A" to a0 at t0 itself
		used  time.Duration
		at    time.Duration
		taken bool
		want  Binding // A's binding after
	}{
		{"a binding made elsewhere a minute ago", false, 0, time.Minute, true, a1},
		{"one made elsewhere is kept its TTL from its last use", false, 0, 10*time.Minute - time.Nanosecond, true, a1},
		{"one expired elsewhere is not taken", false, 0, 10 * time.Minute, false, Binding{}},
		{"a live binding of the table's own, newer, stays", true, -time.Minute, 2 * time.Minute, false, a0},
		{"one of its own as new stays", true, 0, 2 * time.Minute, false, a0},
		{"an older one of its own gives way to one made elsewhere since", true, time.Minute, 2 * time.Minute, true, a1},
		{"an expired one of its own is replaced", true, 11 * time.Minute, 12 * time.Minute, true, a1},
	}
	for _, tt := range tests {
		tb := New(Config{TTL: 10 * time.Minute})
		if tt.own {
			tb.Bind("A", a0, t0)
		}
		now := t0.Add(tt.at)
		if got := tb.Adopt("A", a1, t0.Add(tt.used), now); got != tt.taken {
			t.Fatalf("%s: Adopt = %v, want %v", tt.name, got, tt.taken)
		}
		got, _ := tb.Lookup("A", now)
		if got != tt.want {
			t.Fatalf("%s: bound to %+v, want %+v", tt.name, got, tt.want)
		}
	}
	tb := New(Config{TTL: 10 * time.Minute, Max: 1})
	tb.Adopt("A", a1, t0, t0.Add(time.Minute))
	if _, ok := tb.Lookup("A", t0.Add(10*time.Minute)); ok {
		t.Error("an adopted binding outlived its TTL from its last use elsewhere")
	}
	tb.Adopt("A", a1, t0, t0.Add(time.Minute))
	if got := tb.Bind("A", a1, t0.Add(2*time.Minute)); got != Hit {
		t.Errorf("a success on the adopted key is %v, want hit", got)
	}
	tb.Adopt("B", a0, t0.Add(time.Minute), t0.Add(2*time.Minute))
	if tb.Len() != 1 || tb.Adopt("", a0, t0, t0) {
		t.Errorf("Len %d after adopting beyond Max 1, or an empty name adopted", tb.Len())
	}
}

// TestDue: a binding is due for a check against the replicas every interval after it was
// made here, read from them (taken or not) or checked; none is due without a live binding.
func TestDue(t *testing.T) {
	a0 := Binding{Provider: "p", Key: 0, Model: "p/m"}
	a1 := Binding{Provider: "p", Key: 1, Model: "p/m"}
	tb := New(Config{TTL: 10 * time.Second})
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	steps := []struct {
		name string
		do   func()
		at   time.Duration
		due  bool
	}{
		{"nothing bound", func() {}, 0, false},
		{"just made here", func() { tb.Bind("A", a0, t0) }, 999 * time.Millisecond, false},
		{"made a second ago", func() {}, time.Second, true},
		{"checked", func() { tb.Checked("A", at(time.Second)) }, 1500 * time.Millisecond, false},
		{"read, no newer than its own", func() { tb.Adopt("A", a1, t0, at(3*time.Second)) }, 3500 * time.Millisecond, false},
		{"a second after the read", func() {}, 4 * time.Second, true},
		{"expired", func() {}, 10 * time.Second, false},
	}
	for _, s := range steps {
		s.do()
		if _, _, got := tb.LookupDue("A", at(s.at), time.Second); got != s.due {
			t.Fatalf("%s: due = %v, want %v", s.name, got, s.due)
		}
	}
}
