package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// `tollgate-bench inflight` measures the regime LLM gateways live in: thousands of
// calls held open at once. The fake backend holds every call (fakellm --hold), an open-loop
// driver sends calls at a fixed rate whether or not earlier ones have been answered, and the
// bare proxy and Tollgate take turns, round by round, each group of rounds with fresh
// processes so that one group's memory does not count in the next one's.

// inflightOptions are the flags of `tollgate-bench inflight`.
type inflightOptions struct {
	tollgate, fakellm, self string
	groups                  []group
	duration                time.Duration // arrivals per measured round
	warmup                  time.Duration // arrivals of the unrecorded round each target gets first
	rounds                  int           // measured rounds per target and group
	chunks                  int
	logDir, out             string
	profile                 string // directory for Tollgate's profiles, one folder a group; "" runs the real binary
	strict                  bool
	args                    []string
}

// group is one hold, rate and kind of call; every group runs with fresh processes.
type group struct {
	hold   time.Duration
	rate   int // calls per second
	stream bool
}

func (g group) String() string {
	kind := "non-stream"
	if g.stream {
		kind = "stream"
	}
	return fmt.Sprintf("%s × %s %s", fmtRate(g.rate), g.hold, kind)
}

func fmtRate(r int) string {
	if r >= 1000 && r%1000 == 0 {
		return fmt.Sprintf("%d,000 RPS", r/1000)
	}
	return fmt.Sprintf("%d RPS", r)
}

// inFlight is how many calls the group holds at once in steady state.
func (g group) inFlight() int { return int(float64(g.rate) * g.hold.Seconds()) }

func parseInflight(args []string) (inflightOptions, error) {
	o := inflightOptions{args: args}
	fs := flag.NewFlagSet("tollgate-bench inflight", flag.ContinueOnError)
	fs.StringVar(&o.tollgate, "tollgate", "bin/tollgate", "Tollgate `binary`")
	fs.StringVar(&o.fakellm, "fakellm", "bin/fakellm", "fake backend `binary`")
	rates := fs.String("rates", "1000,2000,3000", "open-loop `rates` (calls/s) with the backend holding each call --hold")
	hold := fs.Duration("hold", time.Second, "how long the backend holds each call at --rates")
	longRates := fs.String("long-rates", "1000", "`rates` with the backend holding each call --long-hold (empty: none)")
	longHold := fs.Duration("long-hold", 5*time.Second, "the longer hold")
	kinds := fs.String("kinds", "non-stream,stream", "which kinds of call: non-stream, stream or both")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "arrivals per measured round")
	fs.DurationVar(&o.warmup, "warmup", 3*time.Second, "arrivals of each target's unrecorded first round (at least 1.5 holds)")
	fs.IntVar(&o.rounds, "rounds", 2, "measured rounds per target and group, interleaved proxy, Tollgate, proxy, ...")
	fs.IntVar(&o.chunks, "chunks", 20, "content chunks per answer, spread over the hold in streams")
	quick := fs.Bool("quick", false, "a smoke run: 100 calls/s held 200ms, one round of 1s")
	fs.StringVar(&o.logDir, "logs", "", "keep the children's logs in `dir` (default: a temporary directory, removed after a clean run)")
	fs.StringVar(&o.out, "out", "", "also write the markdown report to `file`")
	fs.BoolVar(&o.strict, "strict", false, "exit non-zero when an in-flight target (docs/benchmarks.md) is missed, not only on errors")
	fs.StringVar(&o.profile, "profile", "", "run Tollgate in-process with pprof and write each group's profiles to `dir`/groupN")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if *quick {
		*rates, *hold, *longRates, *longHold = "100", 200*time.Millisecond, "50", 400*time.Millisecond
		o.duration, o.warmup, o.rounds = time.Second, 500*time.Millisecond, 1
	}
	streams, err := parseKinds(*kinds)
	if err != nil {
		return o, err
	}
	for _, hr := range []struct {
		hold  time.Duration
		rates string
	}{{*hold, *rates}, {*longHold, *longRates}} {
		rs, err := parseRates(hr.rates)
		if err != nil {
			return o, err
		}
		if len(rs) > 0 && hr.hold <= 0 {
			return o, fmt.Errorf("a hold must be positive, got %s", hr.hold)
		}
		for _, r := range rs {
			for _, s := range streams {
				o.groups = append(o.groups, group{hold: hr.hold, rate: r, stream: s})
			}
		}
	}
	switch {
	case len(o.groups) == 0:
		return o, errors.New("--rates and --long-rates name no rate")
	case o.duration <= 0 || o.warmup <= 0 || o.rounds < 1 || o.chunks < 1:
		return o, errors.New("need --duration > 0, --warmup > 0, --rounds ≥ 1 and --chunks ≥ 1")
	}
	if o.self, err = os.Executable(); err != nil {
		return o, fmt.Errorf("find this binary: %w", err)
	}
	return o, nil
}

func parseRates(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		r, err := strconv.Atoi(f)
		if err != nil || r < 1 || r > 100000 {
			return nil, fmt.Errorf("rate %q: want calls per second from 1 to 100000", f)
		}
		out = append(out, r)
	}
	return out, nil
}

func parseKinds(s string) ([]bool, error) {
	var out []bool
	for _, f := range strings.Split(s, ",") {
		switch strings.TrimSpace(f) {
		case "non-stream":
			out = append(out, false)
		case "stream":
			out = append(out, true)
		default:
			return nil, fmt.Errorf("--kinds: %q is neither non-stream nor stream", f)
		}
	}
	return out, nil
}

// runInflight is `tollgate-bench inflight`.
func runInflight(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	o, err := parseInflight(args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	logDir, done, err := childLogs(o.logDir, "tollgate-inflight-", stderr)
	if err != nil {
		return err
	}
	defer func() { done(err) }()
	rep := &inflightReport{command: inflightCommand(o.args), loadBefore: loadAverage(), timeWaitBefore: timeWaitSockets()}
	start := time.Now()
	for i, g := range o.groups {
		res, err := runGroup(ctx, o, g, fmt.Sprintf("group%d", i), logDir, stderr)
		if err != nil {
			return fmt.Errorf("%s: %w", g, err)
		}
		rep.groups = append(rep.groups, res)
		for _, n := range res.notes {
			fmt.Fprintf(stderr, "%s: %s\n", g, n)
		}
		fmt.Fprintf(stderr, "%s done (%s)\n", g, time.Since(start).Round(time.Second))
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	rep.wall, rep.loadAfter, rep.timeWaitAfter = time.Since(start), loadAverage(), timeWaitSockets()
	return emit(rep, o.out, o.strict, stdout, stderr)
}

func inflightCommand(args []string) string {
	if len(args) == 0 {
		return "make bench-inflight"
	}
	return "make bench-inflight ARGS='" + strings.Join(args, " ") + "'"
}

// groupProcs are one group's children: a fresh backend, proxy and Tollgate.
type groupProcs struct{ fakellm, proxy, tollgate *proc }

// stop stops the backend first, then the proxy and Tollgate: whoever closes a connection
// first keeps it in TIME_WAIT, and these sides' TIME_WAIT entries hold the listening ports
// of processes that are gone, never the ephemeral ports the next group dials from.
//
// Tollgate's drain gives what runs drain_grace (30 s) and Go's server waits up to 5 s for a
// connection that has not sent its first request yet, so it gets longer than the others; a
// stop that took more than a few seconds is reported.
func (ps *groupProcs) stop() (slow string, err error) {
	err = errors.Join(ps.fakellm.stop(), ps.proxy.stop())
	start := time.Now()
	err = errors.Join(err, ps.tollgate.stopWithin(40*time.Second))
	if d := time.Since(start); d > 3*time.Second {
		slow = fmt.Sprintf("Tollgate took %s to stop after SIGTERM", d.Round(100*time.Millisecond))
	}
	return slow, err
}

// stopNow stops what a failed start left running.
func (ps *groupProcs) stopNow() error {
	_, err := ps.stop()
	return err
}

func startGroup(o inflightOptions, g group, name, logDir string) (*groupProcs, error) {
	logDir = filepath.Join(logDir, name)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	ps := &groupProcs{}
	var err error
	ps.fakellm, err = startProc("fakellm", logDir, listeningLine, o.fakellm,
		"--listen", "127.0.0.1:0", "--chunks", fmt.Sprint(o.chunks), "--hold", g.hold.String())
	if err != nil {
		return nil, err
	}
	backend := "http://" + ps.fakellm.addr
	idle := fmt.Sprint(capacityFor(g))
	ps.proxy, err = startProc("proxy", logDir, listeningLine, o.self, "proxy",
		"--listen", "127.0.0.1:0", "--target", backend, "--idle", idle)
	if err != nil {
		return nil, errors.Join(err, ps.stopNow())
	}
	cfg := filepath.Join(logDir, "tollgate.yaml")
	if err := os.WriteFile(cfg, []byte(inflightConfig(backend+"/v1", capacityFor(g))), 0o644); err != nil {
		return nil, errors.Join(fmt.Errorf("write config: %w", err), ps.stopNow())
	}
	if o.profile != "" {
		dir := filepath.Join(o.profile, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, errors.Join(err, ps.stopNow())
		}
		ps.tollgate, err = startProc("tollgate", logDir, tollgateLine, o.self, "gateway",
			"--config", cfg, "--listen", "127.0.0.1:0", "--profile-dir", dir)
	} else {
		ps.tollgate, err = startProc("tollgate", logDir, tollgateLine, o.tollgate, "--config", cfg, "--listen", "127.0.0.1:0")
	}
	if err != nil {
		return nil, errors.Join(err, ps.stopNow())
	}
	return ps, nil
}

// capacityFor is the lanes, caps and idle pools a group gets: far above the calls it holds,
// so that what is measured is the relay, never admission.
func capacityFor(g group) int { return 2*g.inFlight() + 256 }

// inflightConfig is Tollgate's configuration for one group: one openai-kind provider at the
// fake backend, lanes, caps and queue far above the load, no drain delay (the benchmark
// stops it when idle) and no per-client connection cap (every call comes from 127.0.0.1).
func inflightConfig(baseURL string, capacity int) string {
	return fmt.Sprintf(`# Written by tollgate-bench inflight: admission must never reject or queue.
drain_delay: 0s
limits: {max_running: %[1]d, max_admitted: %[2]d, queue_length: %[1]d}
providers:
  - name: %[3]s
    kind: openai
    base_url: %[4]s
    keys: [x]
    lanes: %[1]d
    model_lanes: %[1]d
    refresh_models: 0s
    models:
      - id: %[5]s
`, capacity, 2*capacity, benchProvider, baseURL, benchModel)
}
