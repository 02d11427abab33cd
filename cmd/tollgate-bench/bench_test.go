package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// asMainEnv makes the test binary behave as tollgate-bench itself, so the benchmark can run
// it as its proxy child (it runs os.Executable() with "proxy ...").
const asMainEnv = "TOLLGATE_BENCH_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMainEnv) == "1" {
		if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
			os.Stderr.WriteString("tollgate-bench: " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// buildBinaries builds tollgate and fakellm into a temporary directory.
func buildBinaries(t *testing.T) (tollgate, fakellm string) {
	t.Helper()
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		if goBin, err = exec.LookPath("go"); err != nil {
			t.Skip("no go command to build tollgate and fakellm with")
		}
	}
	dir := t.TempDir()
	cmd := exec.Command(goBin, "build", "-o", dir+string(filepath.Separator),
		"github.com/tollgate/tollgate/cmd/tollgate", "github.com/tollgate/tollgate/cmd/fakellm")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return filepath.Join(dir, "tollgate"), filepath.Join(dir, "fakellm")
}

// TestQuickRun runs the whole harness in --quick mode against real processes and checks that
// every request succeeded and the report has every row.
func TestQuickRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three processes")
	}
	tollgate, fakellm := buildBinaries(t)
	out := quickRun(t, "--quick", "--tollgate", tollgate, "--fakellm", fakellm)
	for _, want := range []string{
		"stream errors: 0 (ok); errors on any target: 0",
		"| non-stream c=1 | direct (a) | 40 |", "| stream c=50 | Tollgate (c) | 120 |",
		"| non-stream c=50 | proxy (b) | 120 |", "Peak RSS (VmHWM): Tollgate ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if rows := regexp.MustCompile(`(?m)^\| (non-)?stream c=\d+ \| `).FindAllString(out, -1); len(rows) != 12+4 {
		t.Errorf("report has %d workload rows, want 12 measurements and 4 overhead rows:\n%s", len(rows), out)
	}
}

// TestTelemetryQuickRun runs --telemetry in --quick mode: both gateways serve every request,
// the "on" one exports spans to the receiver and is scraped (bench fails otherwise), and
// the report has a row per workload. Figures are not judged (--strict is off).
func TestTelemetryQuickRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three processes")
	}
	_, fakellm := buildBinaries(t)
	out := quickRun(t, "--telemetry", "all", "--quick", "--fakellm", fakellm)
	if rows := regexp.MustCompile(`(?m)^\| (non-)?stream c=\d+ \| `).FindAllString(out, -1); len(rows) != 4 {
		t.Errorf("report has %d workload rows, want 4:\n%s", len(rows), out)
	}
	if !regexp.MustCompile(`[1-9]\d* OTLP/HTTP exports received .*, [1-9]\d* scrapes`).MatchString(out) {
		t.Errorf("telemetry was not on:\n%s", out)
	}
}

// quickRunLimit bounds one quick run, to catch a run that never ends; it is not a speed
// target. On a 2-core machine a run took from 14 s to 48 s as other work loaded it (the
// bare proxy is this race-built binary), close to the minute it once had.
const quickRunLimit = 5 * time.Minute

// quickRun runs the benchmark with args, as this binary acting as tollgate-bench, and
// returns its report; any error fails the test.
func quickRun(t *testing.T, args ...string) string {
	t.Helper()
	t.Setenv(asMainEnv, "1")
	o, err := parseOptions(append(args, "--logs", t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), quickRunLimit)
	defer cancel()
	var stdout, stderr bytes.Buffer
	if err := bench(ctx, o, &stdout, &stderr); err != nil {
		t.Fatalf("bench: %v\nstdout:\n%s\nstderr:\n%s", err, &stdout, &stderr)
	}
	return stdout.String()
}

func TestReadStream(t *testing.T) {
	chunk := "data: {\"choices\":[]}\n\n"
	tests := []struct {
		name, body string
		min        int
		wantErr    string // "" for success
	}{
		{"ok", strings.Repeat(chunk, 3) + "data: [DONE]\n\n", 3, ""},
		{"crlf", strings.ReplaceAll(strings.Repeat(chunk, 2)+"data: [DONE]\n\n", "\n", "\r\n"), 2, ""},
		{"done without final blank line", chunk + "data: [DONE]", 1, ""},
		{"no done", strings.Repeat(chunk, 3), 3, "without [DONE]"},
		{"empty", "", 0, "without [DONE]"},
		{"error event", chunk + "data: {\"error\":{\"message\":\"boom\"}}\n\ndata: [DONE]\n\n", 1, "error event"},
		{"named error event", "event: error\ndata: {}\n\n", 0, "error event"},
		{"too few chunks", chunk + "data: [DONE]\n\n", 2, "want at least 2"},
		{"data after done", chunk + "data: [DONE]\n\n" + chunk, 1, "after [DONE]"},
		{"comments ignored", ": keep-alive\n\n" + chunk + "data: [DONE]\n\n", 1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wk := newWorker()
			_, err := wk.readStream(strings.NewReader(tt.body), time.Now(), tt.min)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("readStream: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("readStream error = %v, want one containing %q", err, tt.wantErr)
			case tt.wantErr != "" && !errors.Is(err, errStream):
				t.Fatalf("readStream error %v is not errStream", err)
			}
		})
	}
}

func TestReadWhole(t *testing.T) {
	wk := newWorker()
	big := `{"object":"chat.completion","choices":[{"message":{"content":"` + strings.Repeat("x", 10000) + `"}}]}`
	for _, body := range []string{`{"object":"chat.completion","choices":[]}`, big} {
		if _, err := wk.readWhole(strings.NewReader(body), time.Now()); err != nil {
			t.Errorf("readWhole(%.40q): %v", body, err)
		}
	}
	for _, body := range []string{``, `{"error":{}}`, `{"object":"chat.completion"`} {
		if _, err := wk.readWhole(strings.NewReader(body), time.Now()); err == nil {
			t.Errorf("readWhole(%q) accepted a body that is not a chat.completion", body)
		}
	}
}

func TestQuantile(t *testing.T) {
	ds := func(ms ...int) []time.Duration {
		out := make([]time.Duration, len(ms))
		for i, m := range ms {
			out[i] = time.Duration(m) * time.Millisecond
		}
		return out
	}
	tests := []struct {
		sorted []time.Duration
		q      float64
		want   time.Duration
	}{
		{nil, 0.5, 0},
		{ds(7), 0.99, 7 * time.Millisecond},
		{ds(1, 2, 3, 4), 0.5, 2 * time.Millisecond},
		{ds(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0.99, 10 * time.Millisecond},
		{ds(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0.5, 5 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := quantile(tt.sorted, tt.q); got != tt.want {
			t.Errorf("quantile(%v, %v) = %v, want %v", tt.sorted, tt.q, got, tt.want)
		}
	}
}

func TestWorkloadMatches(t *testing.T) {
	tests := []struct {
		w    workload
		only string
		want bool
	}{
		{workload{stream: true, conc: 50}, "", true},
		{workload{stream: true, conc: 50}, "stream c=50", true},
		{workload{stream: false, conc: 50}, "stream c=50", false},
		{workload{stream: false, conc: 50}, "c=50", true},
		{workload{stream: false, conc: 1}, "non-stream", true},
		{workload{stream: true, conc: 1}, "non-stream", false},
		{workload{stream: true, conc: 1}, "c=5", false},
	}
	for _, tt := range tests {
		if got := tt.w.matches(tt.only); got != tt.want {
			t.Errorf("%v matches %q = %v, want %v", tt.w, tt.only, got, tt.want)
		}
	}
}

func TestAddressLines(t *testing.T) {
	tests := []struct {
		find addrFinder
		line string
		want string // "" for no match
	}{
		{listeningLine, "listening on 127.0.0.1:4000\n", "127.0.0.1:4000"},
		{listeningLine, "starting\n", ""},
		{tollgateLine, `{"level":"info","listen":"127.0.0.1:5000","message":"tollgate is serving; try GET /v1/models"}` + "\n", "127.0.0.1:5000"},
		{tollgateLine, `{"level":"info","config":"x","message":"listen: 127.0.0.1:5000"}` + "\n", ""},
		{tollgateLine, "listening on 127.0.0.1:6000\n", "127.0.0.1:6000"},
		{tollgateLine, "not json\n", ""},
	}
	for _, tt := range tests {
		got, ok := tt.find(tt.line)
		if ok != (tt.want != "") || got != tt.want {
			t.Errorf("find(%q) = %q, %v; want %q", tt.line, got, ok, tt.want)
		}
	}
}

// FuzzReadStream checks the driver's SSE check never panics and never accepts a stream
// without [DONE] or with fewer chunks than asked.
func FuzzReadStream(f *testing.F) {
	f.Add("data: {}\n\ndata: [DONE]\n\n", 1)
	f.Add("event: error\ndata: {}\n\n", 0)
	f.Add("data: [DONE]\r\n\r\n", 0)
	f.Fuzz(func(t *testing.T, body string, minChunks int) {
		wk := newWorker()
		_, err := wk.readStream(strings.NewReader(body), time.Now(), minChunks)
		if err == nil && (!strings.Contains(body, "[DONE]") || strings.Count(body, "data:")-1 < minChunks) {
			t.Fatalf("accepted %q with minChunks %d", body, minChunks)
		}
	})
}
