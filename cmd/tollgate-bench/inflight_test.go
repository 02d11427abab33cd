package main

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestInflightQuickRun runs `tollgate-bench inflight --quick` against real processes: every
// call must succeed, Tollgate's admin state must settle, and the report must have a row per
// target and group and Tollgate's runtime per call.
func TestInflightQuickRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three processes per group")
	}
	tollgate, fakellm := buildBinaries(t)
	t.Setenv(asMainEnv, "1")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	args := []string{"--quick", "--tollgate", tollgate, "--fakellm", fakellm, "--logs", t.TempDir()}
	if err := runInflight(ctx, args, &stdout, &stderr); err != nil {
		t.Fatalf("inflight: %v\nstdout:\n%s\nstderr:\n%s", err, &stdout, &stderr)
	}
	out := stdout.String()
	for _, want := range []string{
		"| 100 RPS × 200ms non-stream | proxy | 100 | 0 |", "| 100 RPS × 200ms stream | tollgate | 100 | 0 |",
		"| 50 RPS × 400ms stream | tollgate | 50 | 0 |", "goroutines per call",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if rows := regexp.MustCompile(`(?m)^\| \d+ RPS × \S+ (non-)?stream \| (proxy|tollgate) \| `).FindAllString(out, -1); len(rows) != 8 {
		t.Errorf("report has %d target rows, want 2 targets × 4 groups:\n%s", len(rows), out)
	}
}

func TestParseInflight(t *testing.T) {
	tests := []struct {
		args   []string
		groups int
		err    string
	}{
		{nil, 8, ""},
		{[]string{"--rates", "3000", "--long-rates", "", "--kinds", "non-stream"}, 1, ""},
		{[]string{"--rates", "1000,2000", "--long-rates", ""}, 4, ""},
		{[]string{"--rates", "0"}, 0, `rate "0"`},
		{[]string{"--rates", "fast"}, 0, `rate "fast"`},
		{[]string{"--kinds", "sse"}, 0, `"sse" is neither`},
		{[]string{"--rates", "", "--long-rates", ""}, 0, "name no rate"},
		{[]string{"--hold", "0s"}, 0, "a hold must be positive"},
		{[]string{"--rounds", "0"}, 0, "--rounds ≥ 1"},
	}
	for _, tt := range tests {
		o, err := parseInflight(tt.args)
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%q: %v", tt.args, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%q: error %v, want one with %q", tt.args, err, tt.err)
		case tt.err == "" && len(o.groups) != tt.groups:
			t.Errorf("%q: %d groups, want %d", tt.args, len(o.groups), tt.groups)
		}
	}
}

// TestSaturation: the note appears once the proxy's own median call waits longer than the
// p99 allowance, and not before.
func TestSaturation(t *testing.T) {
	for _, tt := range []struct {
		added50 time.Duration
		note    bool
	}{
		{3 * time.Millisecond, false},
		{maxAddedP99, false},
		{maxAddedP99 + time.Millisecond, true},
		{500 * time.Millisecond, true},
	} {
		n := saturation(figures{added50: tt.added50})
		if (n != "") != tt.note || tt.note && !strings.Contains(n, fmt.Sprintf("%+.1f ms", float64(tt.added50)/msPerDuration)) {
			t.Errorf("added p50 %v: note %q, want one: %v", tt.added50, n, tt.note)
		}
	}
}
