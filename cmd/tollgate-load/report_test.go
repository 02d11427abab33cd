package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	xs := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	cases := []struct{ p, want float64 }{{50, 5}, {90, 9}, {99, 10}, {100, 10}, {0, 1}, {10, 1}, {11, 2}}
	for _, c := range cases {
		if got := percentile(xs, c.p); got != c.want {
			t.Errorf("p%v = %v, want %v", c.p, got, c.want)
		}
	}
	if got := percentile(nil, 50); got != 0 {
		t.Errorf("empty: %v", got)
	}
	s := summarize([]float64{3, 1, 2})
	if s.N != 3 || s.P50 != 2 || s.Max != 3 {
		t.Errorf("summarize: %+v", s)
	}
}

func TestResultAdd(t *testing.T) {
	r := newResult("x", "y")
	outs := []outcome{
		{status: 200, queueMs: 5, ttfb: time.Millisecond, total: 2 * time.Millisecond},
		{status: 429, code: "gateway_overloaded", queueMs: 0, total: time.Millisecond},
		{cancelled: true, queueMs: -1},
	}
	for range 7 {
		outs = append(outs, outcome{status: 502, code: "upstream_error", breach: "status 502"})
	}
	r.add(outs)
	if r.Requests != 10 || r.Codes["200"] != 1 || r.Codes["429 gateway_overloaded"] != 1 || r.Codes["502 upstream_error"] != 7 {
		t.Errorf("codes %v", r.Codes)
	}
	if len(r.Breaches) != 6 || !strings.Contains(r.Breaches[5], "7 malformed") {
		t.Errorf("breaches %q", r.Breaches)
	}
	if r.QueueMs.N != 9 || r.TTFBMs.N != 1 {
		t.Errorf("queue %+v ttfb %+v", r.QueueMs, r.TTFBMs)
	}
	var text, js bytes.Buffer
	printText(&text, []*result{r})
	if !strings.Contains(text.String(), "BREACHED (6)") {
		t.Errorf("text report lacks the breach count:\n%s", text.String())
	}
	if err := printJSON(&js, []*result{r}); err != nil || !json.Valid(js.Bytes()) {
		t.Errorf("json report: %v", err)
	}
}

func TestExpectedOrder(t *testing.T) {
	calls := []call{{priority: "background", tag: "b1"}, {priority: "interactive", tag: "i1"},
		{priority: "normal", tag: "n1"}, {priority: "interactive", tag: "i2"}}
	got := strings.Join(expectedOrder(calls, []string{"interactive", "normal", "background"}), " ")
	if got != "i1 i2 n1 b1" {
		t.Errorf("order %s", got)
	}
}

func TestChoose(t *testing.T) {
	cases := []struct {
		names   string
		remote  bool
		want    string
		wantErr bool
	}{
		{"burst-20", false, "burst-20", false},
		{"burst-20, cancel-storm", true, "burst-20 cancel-storm", false},
		{"queue-memory", true, "", true},
		{"nope", false, "", true},
		{",", false, "", true},
	}
	for _, c := range cases {
		got, err := choose(c.names, c.remote)
		if (err != nil) != c.wantErr {
			t.Errorf("%q: err %v", c.names, err)
			continue
		}
		var names []string
		for _, s := range got {
			names = append(names, s.name)
		}
		if strings.Join(names, " ") != c.want {
			t.Errorf("%q: %v", c.names, names)
		}
	}
	all, _ := choose("all", true)
	for _, s := range all {
		if s.localOnly {
			t.Errorf("all with --target includes %s", s.name)
		}
	}
}
