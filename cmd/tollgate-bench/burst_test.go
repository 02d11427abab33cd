package main

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestBurstQuickRun runs `tollgate-bench burst` small against real processes: every call of
// every format must be answered 200 and the report must have a row per format with its idle
// samples.
func TestBurstQuickRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Tollgate per format")
	}
	tollgate, fakellm := buildBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	args := []string{"--calls", "3", "--mb", "0.05", "--idle", "1s", "--tollgate", tollgate, "--fakellm", fakellm, "--logs", t.TempDir()}
	if err := runBurst(ctx, args, &stdout, &stderr); err != nil {
		t.Fatalf("burst: %v\nstdout:\n%s\nstderr:\n%s", err, &stdout, &stderr)
	}
	rows := regexp.MustCompile(`(?m)^\| (chat|messages|responses) \| [\d.]+ \| \d+ \| \d+ / \d+ \|$`).FindAllString(stdout.String(), -1)
	if len(rows) != 3 {
		t.Errorf("report has %d format rows with one idle sample, want 3:\n%s", len(rows), &stdout)
	}
}

func TestParseBurst(t *testing.T) {
	for _, tt := range []struct {
		args []string
		err  string
	}{
		{[]string{"--formats", "chat,batch"}, `"batch" is not chat, messages or responses`},
		{[]string{"--calls", "0"}, "need --calls ≥ 1"},
		{[]string{"--mb", "0.0001"}, "need --calls ≥ 1"},
		{[]string{"--idle", "500ms"}, "need --calls ≥ 1"},
	} {
		if _, err := parseBurst(tt.args); err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("parseBurst(%q) = %v, want an error with %q", tt.args, err, tt.err)
		}
	}
	o, err := parseBurst(nil)
	if err != nil || o.calls != 40 || o.size != 7_700_000 || len(o.formats) != 3 {
		t.Errorf("defaults: %+v, %v", o, err)
	}
}

// TestBurstBody: each format's body is a JSON object of the size asked for, give or take its
// envelope, whose text survives decoding.
func TestBurstBody(t *testing.T) {
	for f := range burstFormats {
		b := burstBody(f, 100_000)
		var v map[string]any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: not JSON: %v", f, err)
		}
		if len(b) < 100_000-200 || len(b) > 100_000+400 {
			t.Errorf("%s: %d bytes, want about 100,000", f, len(b))
		}
	}
}
