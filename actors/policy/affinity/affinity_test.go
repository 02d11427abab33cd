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
