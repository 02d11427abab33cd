package cluster

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// FuzzDecodeEvent: anyone who can publish on the Redis can send anything on the events
// channel. Whatever it is, decoding never panics, and what it accepts has the fields its
// kind needs and survives a round trip through the wire form.
func FuzzDecodeEvent(f *testing.F) {
	for _, s := range []string{
		`{"kind":"freed","replica":"a","scopes":["gateway","provider/x"]}`,
		`{"kind":"cooled","replica":"a","name":"key/p/0","for_ms":1500}`,
		`{"kind":"lanes","replica":"b","name":"provider/nvidia","lanes":2}`,
		`{"kind":"freed","replica":"a","scopes":{}}`,
		`{"kind":"poll","replica":"a"}`,
		`{"kind":"cooled","replica":"a b","name":"k","for_ms":-1}`,
		`[]`, ``, `{"kind":"lanes","replica":"x","name":"s","lanes":1e99}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, payload string) {
		ev, err := decodeEvent(payload)
		if err != nil {
			return
		}
		switch {
		case checkName("replica", ev.Replica) != nil:
			t.Fatalf("accepted a bad replica: %+v", ev)
		case ev.Kind == Freed && len(ev.Scopes) == 0,
			ev.Kind == Cooled && (ev.For <= 0 || ev.Name == ""),
			ev.Kind == Learned && (ev.Lanes <= 0 || ev.Name == ""):
			t.Fatalf("accepted %+v", ev)
		case ev.Kind != Freed && ev.Kind != Cooled && ev.Kind != Learned:
			t.Fatalf("accepted kind %q", ev.Kind)
		}
		w := wireEvent{Kind: ev.Kind, Replica: ev.Replica, Scopes: ev.Scopes, Name: ev.Name,
			ForMS: ev.For.Milliseconds(), Lanes: ev.Lanes}
		b, _ := json.Marshal(w)
		again, err := decodeEvent(string(b))
		if err != nil || !reflect.DeepEqual(again, ev) {
			t.Fatalf("round trip of %+v: %+v, %v", ev, again, err)
		}
	})
}

// replyOf turns fuzz text into a Redis reply as go-redis hands a script's array over:
// integers for numeric fields, strings for the rest.
func replyOf(s string) []any {
	var out []any
	for _, f := range strings.Split(s, " ") {
		if n, err := strconv.ParseInt(f, 10, 64); err == nil {
			out = append(out, n)
		} else {
			out = append(out, f)
		}
	}
	return out
}

// FuzzParseBeat: a heartbeat answer of any shape is decoded or refused, never a panic,
// and what is decoded lists each replica with its age, and files each entry of the view
// under the replica that holds it.
func FuzzParseBeat(f *testing.F) {
	for _, s := range []string{"0  1 5000 2 a 10 b 20 0", "3 abcd 0", "1", "x y z", "0 - 1 a",
		"0  1 5000 2 a 10 b 20 1 p/x 2 a|i|1 b|i|2", "0 x 1 7 1 a 0 2 s 1 a|i|3 t 0", "0  1 5000 1 a 10 1 s 3 a|i|1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		res, err := parseBeat(replyOf(s))
		if err != nil {
			return
		}
		if len(res.names) != len(res.ages) && !hasDupes(res.names) {
			t.Fatalf("%q: names %v ages %v", s, res.names, res.ages)
		}
		for _, n := range res.names {
			if _, ok := res.ages[n]; !ok {
				t.Fatalf("%q: %s without an age", s, n)
			}
		}
		for scope, by := range res.view {
			for r, ms := range by {
				for _, m := range ms {
					if memberReplica(m) != r {
						t.Fatalf("%q: %s in %s filed under %s", s, m, scope, r)
					}
				}
			}
		}
	})
}

func hasDupes(names []string) bool {
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			return true
		}
		seen[n] = true
	}
	return false
}

// FuzzParseOccupancy: an occupancy answer of any shape is decoded or refused; a decoded
// one counts exactly the members it listed.
func FuzzParseOccupancy(f *testing.F) {
	for _, s := range []string{"2 a|x|1 b|y|2 0", "1 a|x|1 5", "-1", "3 a", "0 0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		res, err := parseOccupancy([]string{"s1", "s2"}, replyOf(s))
		if err != nil {
			return
		}
		total := 0
		for _, by := range res {
			for _, n := range by {
				total += n
			}
		}
		if members := len(replyOf(s)) - 2; total > members {
			t.Fatalf("%q: %d counted, %d members at most", s, total, members)
		}
	})
}

// TestMemberReplica: a lease's replica is read back from its member.
func TestMemberReplica(t *testing.T) {
	for _, tc := range []struct{ m, want string }{
		{member("host:8080", "ab12", 7), "host:8080"}, {"nobar", ""}, {"a|b", ""}, {"a|b|c", "a"},
	} {
		if got := memberReplica(tc.m); got != tc.want {
			t.Errorf("memberReplica(%q) = %q, want %q", tc.m, got, tc.want)
		}
	}
}

// FuzzDecodeBinding: a stored binding that decodes is one a replica could have written,
// and writing it again reads back the same.
func FuzzDecodeBinding(f *testing.F) {
	for _, s := range []string{`{"p":"openai","k":2,"m":"openai/gpt-5"}`, `{"p":"","k":0,"m":"x"}`, `{"p":"a","k":-1,"m":"b"}`,
		`{"p":"a","k":65536,"m":"b"}`, `{"p":"a","k":1e3,"m":"b"}`, `[]`, `null`, ``} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := decodeBinding(s)
		if err != nil {
			return
		}
		if b.Provider == "" || b.Model == "" || b.Key < 0 || b.Key >= maxBindingKey {
			t.Fatalf("%q decoded as %+v", s, b)
		}
		again, err := json.Marshal(wireBinding{Provider: b.Provider, Key: b.Key, Model: b.Model})
		if err != nil {
			t.Fatal(err)
		}
		if b2, err := decodeBinding(string(again)); err != nil || b2 != b {
			t.Fatalf("%q decoded as %+v, written as %s, read back as %+v, %v", s, b, again, b2, err)
		}
	})
}
