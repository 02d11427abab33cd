package policy

import (
	"reflect"
	"testing"
)

// TestSlotsHold: a held client has no room and takes no slot (a forced start still
// counts); Unhold ends only the holds it is told of, and says whether it ended one; each
// hold that begins or ends is told to Changed.
func TestSlotsHold(t *testing.T) {
	var changed []string
	s := NewSlots(func(name string) { changed = append(changed, name) })
	s.Hold("a")
	s.Hold("b")
	s.Hold("a") // held already: nothing changes
	if want := []string{"a", "b"}; !reflect.DeepEqual(changed, want) {
		t.Errorf("changed %v by the holds, want %v", changed, want)
	}
	changed = nil
	if r := s.Room("a", 2); r != 0 {
		t.Errorf("a held client's room: %d, want 0", r)
	}
	if s.Take("a", 2, false) {
		t.Error("a held client took a slot")
	}
	if !s.Take("a", 2, true) || s.Running("a") != 1 {
		t.Error("a forced start of a held client (a batch member) was not counted")
	}
	cases := []struct {
		name     string
		freed    func(string) bool
		ended    bool
		heldA, b bool
	}{
		{"another's scope", func(n string) bool { return n == "c" }, false, true, true},
		{"b's scope", func(n string) bool { return n == "b" }, true, true, false},
		{"every scope", nil, true, false, false},
		{"none held", nil, false, false, false},
	}
	for _, c := range cases {
		if got := s.Unhold(c.freed); got != c.ended {
			t.Errorf("%s: Unhold reported %v, want %v", c.name, got, c.ended)
		}
		if s.Held("a") != c.heldA || s.Held("b") != c.b {
			t.Errorf("%s: held a %v b %v, want %v %v", c.name, s.Held("a"), s.Held("b"), c.heldA, c.b)
		}
	}
	if len(changed) != 2 || changed[0] != "b" || changed[1] != "a" {
		t.Errorf("changed %v by the unholds, want [b a]", changed)
	}
	if r := s.Room("a", 3); r != 2 || !s.Take("a", 3, false) {
		t.Errorf("an unheld client: room %d, want 2, and a slot", r)
	}
}
