// Command tollgate-bench measures what Tollgate adds to a relayed request. It runs
// the fake backend, a bare httputil.ReverseProxy and Tollgate as separate processes on
// 127.0.0.1 and drives all three with the same requests, interleaved round by round (direct,
// proxy, Tollgate, direct, ...) so that drift hits them equally. It prints a markdown report:
// latency and time to first chunk added against calling the backend directly, throughput as
// a ratio to the bare proxy, stream errors and Tollgate's peak RSS.
//
//	tollgate-bench [--tollgate bin/tollgate] [--fakellm bin/fakellm] [--quick] [--profile DIR]
//	tollgate-bench inflight [--rates 1000,2000,3000] [--hold 1s] [--quick] ...  (calls held open; inflight.go)
//	tollgate-bench burst [--calls 40] [--mb 7.7] [--idle 30s]  (memory of a burst of large bodies; burst.go)
//	tollgate-bench --telemetry all|metrics [--quick]    (Tollgate with telemetry on against off)
//	tollgate-bench proxy --listen ADDR --target URL [--idle N]  (the bare proxy, run by the benchmarks)
//	tollgate-bench gateway --config FILE [--profile-dir DIR] [--no-metrics]  (Tollgate in process)
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "tollgate-bench:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "proxy":
			return serveProxy(args[1:])
		case "gateway":
			return serveGateway(args[1:])
		case "inflight":
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runInflight(ctx, args[1:], stdout, stderr)
		case "burst":
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runBurst(ctx, args[1:], stdout, stderr)
		}
	}
	opts, err := parseOptions(args)
	if errors.Is(err, flag.ErrHelp) {
		return nil // the usage is printed
	}
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return bench(ctx, opts, stdout, stderr)
}

// options are the benchmark's flags.
type options struct {
	tollgate, fakellm string // binaries
	self              string // this binary, run as the proxy (and the profiled gateway)
	rounds            int
	n1, n50           int // requests per target per round at concurrency 1 and 50
	conc              int // the high concurrency (50)
	chunks            int // content chunks per streamed answer
	quick             bool
	profile           string // directory for Tollgate's profiles; "" runs the real binary
	logDir            string // where the children's logs go; "" → a temporary directory
	out               string // also write the report to this file
	strict            bool   // a missed performance target fails the run
	only              string // run only the workloads matching these words (profiling)
	telemetry         string // "": the relay benchmark; "all" or "metrics": telemetry on against off (telemetry.go)
	args              []string
}

func parseOptions(args []string) (options, error) {
	o := options{args: args}
	fs := flag.NewFlagSet("tollgate-bench", flag.ContinueOnError)
	fs.StringVar(&o.tollgate, "tollgate", "bin/tollgate", "Tollgate `binary`")
	fs.StringVar(&o.fakellm, "fakellm", "bin/fakellm", "fake backend `binary`")
	fs.IntVar(&o.rounds, "rounds", 30, "interleaved measurement rounds")
	fs.IntVar(&o.n1, "n1", 300, "requests per target, workload and round at concurrency 1")
	fs.IntVar(&o.n50, "n50", 1200, "requests per target, workload and round at the high concurrency")
	fs.IntVar(&o.conc, "conc", 50, "the high concurrency")
	fs.IntVar(&o.chunks, "chunks", 20, "content chunks per streamed answer")
	fs.BoolVar(&o.quick, "quick", false, "a smoke run of a few hundred requests per target")
	fs.StringVar(&o.profile, "profile", "", "run Tollgate in-process with pprof and write its profiles to `dir`")
	fs.StringVar(&o.logDir, "logs", "", "keep the children's logs in `dir` (default: a temporary directory, removed after a clean run)")
	fs.StringVar(&o.out, "out", "", "also write the markdown report to `file`")
	fs.StringVar(&o.only, "only", "", "run only the workloads named by `words`: \"stream c=50\", \"non-stream\", \"c=1\" (for profiling)")
	fs.StringVar(&o.telemetry, "telemetry", "", "compare Tollgate with telemetry on against off: `what` is \"all\" (metrics counting and OTLP tracing) or \"metrics\" (counting only)")
	fs.BoolVar(&o.strict, "strict", false, "exit non-zero when a performance target is missed, not only on errors")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.quick {
		o.rounds, o.n1, o.n50 = 2, 20, 60
	}
	if o.telemetry != "" && o.telemetry != "all" && o.telemetry != "metrics" {
		return o, fmt.Errorf("--telemetry %q: want all or metrics", o.telemetry)
	}
	if o.rounds < 1 || o.n1 < 1 || o.n50 < o.conc || o.conc < 2 || o.chunks < 1 {
		return o, errors.New("need --rounds ≥ 1, --n1 ≥ 1, --conc ≥ 2, --n50 ≥ --conc and --chunks ≥ 1")
	}
	if !(workload{stream: true, conc: 1}.matches(o.only) || workload{stream: false, conc: 1}.matches(o.only) ||
		workload{stream: true, conc: o.conc}.matches(o.only) || workload{stream: false, conc: o.conc}.matches(o.only)) {
		return o, fmt.Errorf("--only %q names no workload (stream, non-stream, c=1, c=%d)", o.only, o.conc)
	}
	self, err := os.Executable()
	if err != nil {
		return o, fmt.Errorf("find this binary: %w", err)
	}
	o.self = self
	return o, nil
}

// bench starts the three processes, measures, stops them and writes the report.
func bench(ctx context.Context, o options, stdout, stderr io.Writer) (err error) {
	logDir, done, err := childLogs(o.logDir, "tollgate-bench-", stderr)
	if err != nil {
		return err
	}
	defer func() { done(err) }()
	if o.telemetry != "" {
		return benchTelemetry(ctx, o, logDir, stdout, stderr)
	}
	ps, err := startAll(o, logDir)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, ps.stop()) }()

	r := measure(ctx, o, ps, stderr)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	r.tollgateRSS, err = peakRSS(ps.tollgate.cmd.Process.Pid)
	if err != nil {
		return err
	}
	r.proxyRSS, _ = peakRSS(ps.proxy.cmd.Process.Pid)
	r.tollgateCPU, _ = cpuTime(ps.tollgate.cmd.Process.Pid)
	r.proxyCPU, _ = cpuTime(ps.proxy.cmd.Process.Pid)
	return report(o, r, stdout, stderr)
}

// report writes the markdown and decides the exit status: errors always fail the run,
// missed performance targets only with --strict.
func report(o options, r *results, stdout, stderr io.Writer) error {
	return emit(r, o.out, o.strict, stdout, stderr)
}

// A benchmark's report: its markdown (and whether every target was met) and the first
// errors of the calls that failed, empty when none did.
type benchReport interface {
	write(w io.Writer) (met bool)
	errorReport() string
}

// emit writes r to stdout and to the file out unless that is empty, and decides the exit
// status: errors always fail the run, missed performance targets only when strict.
func emit(r benchReport, out string, strict bool, stdout, stderr io.Writer) error {
	var b strings.Builder
	met := r.write(&b)
	fmt.Fprint(stdout, b.String())
	if out != "" {
		if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
	}
	if msgs := r.errorReport(); msgs != "" {
		fmt.Fprint(stderr, msgs)
		return errors.New("calls failed; see the first errors above")
	}
	if !met {
		fmt.Fprintln(stderr, "tollgate-bench: some targets were missed (marked MISS)")
		if strict {
			return errors.New("performance targets missed")
		}
	}
	return nil
}

// procs are the benchmark's children. offModel, when set, is the model id the proxy slot is
// asked for (with --telemetry that slot is a Tollgate).
type procs struct {
	fakellm, proxy, tollgate *proc
	offModel                 string
}

func startAll(o options, logDir string) (*procs, error) {
	ps := &procs{}
	var err error
	ps.fakellm, err = startProc("fakellm", logDir, listeningLine, o.fakellm,
		"--listen", "127.0.0.1:0", "--chunks", fmt.Sprint(o.chunks))
	if err != nil {
		return nil, err
	}
	backend := "http://" + ps.fakellm.addr
	ps.proxy, err = startProc("proxy", logDir, listeningLine, o.self, "proxy", "--listen", "127.0.0.1:0", "--target", backend)
	if err != nil {
		return nil, errors.Join(err, ps.stop())
	}
	cfg := filepath.Join(logDir, "tollgate.yaml")
	if err := os.WriteFile(cfg, []byte(tollgateConfig(backend+"/v1")), 0o644); err != nil {
		return nil, errors.Join(fmt.Errorf("write config: %w", err), ps.stop())
	}
	if o.profile != "" {
		if err := os.MkdirAll(o.profile, 0o755); err != nil {
			return nil, errors.Join(err, ps.stop())
		}
		ps.tollgate, err = startProc("tollgate", logDir, tollgateLine, o.self, "gateway",
			"--config", cfg, "--listen", "127.0.0.1:0", "--profile-dir", o.profile)
	} else {
		ps.tollgate, err = startProc("tollgate", logDir, tollgateLine, o.tollgate,
			"--config", cfg, "--listen", "127.0.0.1:0")
	}
	if err != nil {
		return nil, errors.Join(err, ps.stop())
	}
	return ps, nil
}

// stop stops Tollgate first (its profile is written at shutdown), then the proxy and backend.
func (ps *procs) stop() error {
	return errors.Join(ps.tollgate.stop(), ps.proxy.stop(), ps.fakellm.stop())
}

// benchModel is the backend model; Tollgate serves it as benchProvider/benchModel.
const (
	benchProvider = "bench"
	benchModel    = "fake-model"
)

// tollgateConfig points one openai-kind provider at the fake backend, with limits far above
// the benchmark's concurrency so admission never rejects or queues.
func tollgateConfig(baseURL string) string {
	return `# Written by tollgate-bench: admission must never reject or queue in this benchmark.
limits: {max_running: 64, max_admitted: 256, queue_length: 64}
providers:
  - name: ` + benchProvider + `
    kind: openai
    base_url: ` + baseURL + `
    keys: [x]
    lanes: 64
    model_lanes: 64
    refresh_models: 0s
    models:
      - id: ` + benchModel + `
`
}

// measure warms every path up, then runs the interleaved rounds.
func measure(ctx context.Context, o options, ps *procs, stderr io.Writer) *results {
	start := time.Now()
	targets := [3]*target{
		newTarget("direct", "http://"+ps.fakellm.addr, benchModel, o.conc),
		newTarget("proxy", "http://"+ps.proxy.addr, cmp.Or(ps.offModel, benchModel), o.conc),
		newTarget("tollgate", "http://"+ps.tollgate.addr, benchProvider+"/"+benchModel, o.conc),
	}
	r := &results{quick: o.quick, command: commandLine(o), loadBefore: loadAverage()}
	for _, wl := range []workload{{false, 1, o.n1}, {true, 1, o.n1}, {false, o.conc, o.n50}, {true, o.conc, o.n50}} {
		if wl.matches(o.only) {
			r.workloads = append(r.workloads, wl)
		}
	}
	r.tallies = make([][3]tally, len(r.workloads))
	sent := [3]int{}
	// Warm-up: connections, goroutine stacks and the heap reach their working size. Its
	// timings are dropped, its errors are not.
	for i, wl := range r.workloads {
		for j, t := range targets {
			b := runBatch(ctx, t, wl.stream, wl.conc, max(wl.n/4, wl.conc), o.chunks)
			r.tallies[i][j].addErrors(b)
			sent[j] += len(b.samples) + b.errs
		}
	}
	for round := range o.rounds {
		for i, wl := range r.workloads {
			for j, t := range targets {
				b := runBatch(ctx, t, wl.stream, wl.conc, wl.n, o.chunks)
				r.tallies[i][j].add(b)
				sent[j] += len(b.samples) + b.errs
			}
		}
		if ctx.Err() != nil {
			break
		}
		fmt.Fprintf(stderr, "round %d/%d done (%s)\n", round+1, o.rounds, time.Since(start).Round(time.Second))
	}
	r.proxyReqs, r.tollgateReqs = sent[1], sent[2]
	r.wall = time.Since(start)
	r.loadAfter = loadAverage()
	return r
}

// loadAverage returns the 1-minute load average, or "?".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

// commandLine is how the report names the run.
func commandLine(o options) string {
	if len(o.args) == 0 {
		return "make bench-relay"
	}
	return "make bench-relay ARGS='" + strings.Join(o.args, " ") + "'"
}

// childLogs is the directory for the children's logs: dir, or a temporary one. done(err)
// removes a temporary one after a clean run and otherwise says where the logs are.
func childLogs(dir, prefix string, stderr io.Writer) (string, func(error), error) {
	keep := dir != ""
	if !keep {
		var err error
		if dir, err = os.MkdirTemp("", prefix); err != nil {
			return "", nil, err
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, err
	}
	return dir, func(err error) {
		if err == nil && !keep {
			_ = os.RemoveAll(dir)
		} else {
			fmt.Fprintf(stderr, "logs kept in %s\n", dir)
		}
	}, nil
}
