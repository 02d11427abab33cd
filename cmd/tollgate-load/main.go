// Command tollgate-load is Tollgate's load harness. It runs named scenarios against an
// in-process gateway (served on a loopback listener, with one fake backend per provider) or
// against a running gateway (--target), checks the admission invariants and exits non-zero
// when any is breached:
//
//   - every answer is a success or a well-formed 429 (known code, Retry-After,
//     retry-after-ms, retry_after_ms), and carries X-Gateway-Queue-Ms and X-Request-Id;
//   - the backends never see more concurrent calls than the provider's lanes, the model's
//     model_lanes or the gateway's max_running allow;
//   - /admin/state shows 0 running and 0 queued within 2 s of the end;
//   - the process's goroutines return to their count before the load.
//
// It prints answers by code and p50/p90/p99 of queue wait (X-Gateway-Queue-Ms), time to
// first byte and total time. Performance targets (overload, queue-memory) are reported as
// met or missed but are not breaches.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/tollgate/tollgate/cmd/internal/app"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == childFlag {
		if err := runQueueClients(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "tollgate-load child:", err)
			os.Exit(1)
		}
		return
	}
	// The in-process gateway runs with cmd/tollgate's collector settings (a soft memory
	// limit only from GOMEMLIMIT or the container's cgroup).
	_ = app.TuneGC()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	code, err := run(ctx, os.Args[1:], os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tollgate-load:", err)
	}
	os.Exit(code)
}

// errBreached is returned when a scenario broke an invariant.
var errBreached = errors.New("invariants breached")

// run parses the flags, runs the chosen scenarios and reports. It returns the exit code: 0
// when every invariant held, 1 on a breach, 2 on a usage error.
func run(ctx context.Context, args []string, out io.Writer) (int, error) {
	fs := flag.NewFlagSet("tollgate-load", flag.ContinueOnError)
	fs.SetOutput(out)
	var (
		names    = fs.String("scenario", "burst-20,burst-50,mixed-priority,cancel-storm", "comma-separated scenarios to run, or \"all\"")
		list     = fs.Bool("list", false, "list the scenarios and exit")
		asJSON   = fs.Bool("json", false, "print the results as JSON")
		target   = fs.String("target", "", "URL of a running gateway to load instead of an in-process one")
		models   = fs.String("models", "", "with --target: comma-separated model ids to send to")
		seed     = fs.Uint64("seed", uint64(time.Now().UnixNano()), "random seed (shuffles, hang-up times)")
		overFor  = fs.Duration("overload-for", 2*time.Second, "overload: how long each phase (closed loop, open loop) lasts")
		overRate = fs.Float64("overload-rate", 10000, "overload: calls per second offered in the open-loop phase")
		queued   = fs.Int("queued", 10000, "queue-memory: how many requests to hold in the queue")
		maxWhole = fs.Duration("timeout", 3*time.Minute, "abort the whole run after this long")
		cpuProf  = fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	)
	if err := fs.Parse(args); err != nil {
		return 2, err
	}
	if *list {
		listScenarios(out)
		return 0, nil
	}
	chosen, err := choose(*names, *target != "")
	if err != nil {
		return 2, err
	}
	o := runOpts{target: *target, seed: *seed, overloadFor: *overFor, overloadRate: *overRate, queued: *queued, timed: true}
	if *target != "" {
		o.models = splitList(*models)
		if len(o.models) == 0 {
			return 2, errors.New("--target needs --models")
		}
	}
	if *cpuProf != "" {
		stop, err := startCPUProfile(*cpuProf)
		if err != nil {
			return 2, err
		}
		defer stop()
	}
	ctx, cancel := context.WithTimeout(ctx, *maxWhole)
	defer cancel()
	return runScenarios(ctx, chosen, o, out, *asJSON)
}

// listScenarios prints each scenario's name and what it checks.
func listScenarios(out io.Writer) {
	for _, s := range scenarios {
		where := ""
		if s.localOnly {
			where = " (in-process only)"
		}
		fmt.Fprintf(out, "%-16s %s%s\n", s.name, s.about, where)
	}
}

// startCPUProfile profiles the process into the file at path until the function it returns
// is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// runScenarios runs the chosen scenarios in turn and prints their results, as text as each
// one ends or as JSON at the end; it fails when any result has a breach.
func runScenarios(ctx context.Context, chosen []scenario, o runOpts, out io.Writer, asJSON bool) (int, error) {
	if !asJSON {
		fmt.Fprintf(out, "tollgate-load: seed %d\n", o.seed)
	}
	var results []*result
	for _, s := range chosen {
		rs := s.run(ctx, o)
		if !asJSON {
			printText(out, rs)
		}
		results = append(results, rs...)
	}
	if asJSON {
		if err := printJSON(out, results); err != nil {
			return 1, err
		}
	}
	for _, r := range results {
		if len(r.Breaches) > 0 {
			return 1, fmt.Errorf("%w (seed %d)", errBreached, o.seed)
		}
	}
	return 0, nil
}

// choose resolves --scenario; with --target, in-process-only scenarios are an error.
func choose(names string, remote bool) ([]scenario, error) {
	if names == "all" {
		var all []scenario
		for _, s := range scenarios {
			if !remote || !s.localOnly {
				all = append(all, s)
			}
		}
		return all, nil
	}
	var chosen []scenario
	for _, name := range splitList(names) {
		found := false
		for _, s := range scenarios {
			if s.name == name {
				if remote && s.localOnly {
					return nil, fmt.Errorf("scenario %s needs the in-process gateway; drop --target", name)
				}
				chosen, found = append(chosen, s), true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown scenario %q (see --list)", name)
		}
	}
	if len(chosen) == 0 {
		return nil, errors.New("no scenario chosen (see --list)")
	}
	return chosen, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
