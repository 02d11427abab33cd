package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"time"
)

// The in-flight targets, as ratios to the bare proxy in the same run.
const (
	minInflightThroughput = 0.97                  // Tollgate's req/s over the proxy's, at the top rate of the short hold
	maxAddedP99           = 50 * time.Millisecond // Tollgate's p99 over the proxy's, likewise
	maxCPURatio           = 1.3                   // Tollgate's CPU per call over the proxy's, likewise
	maxExtraPerCall       = 24 << 10              // Tollgate's RSS per call in flight over the proxy's, at the long hold
)

// side is one target's rounds of one group, added up.
type side struct {
	name         string
	idleRSS      int64 // VmRSS once started, before any call
	samples      []sample
	sent, errs   int
	errMsgs      []string
	rates        []float64 // answered calls per second of each round
	peakInFlight int64
	peakRSS      int64
	cpu          time.Duration
	steadyConns  int64
	steadyWindow time.Duration
	idleRuntime  runtimeStats // Tollgate's runtime before any call
	mid          runtimeStats // the last round's, in the middle of its steady load
}

func (s *side) addErrors(r sideRound) {
	s.errs += r.errs
	for _, m := range r.errMsgs {
		if len(s.errMsgs) < maxErrMsgs {
			s.errMsgs = append(s.errMsgs, m)
		}
	}
}

func (s *side) add(r sideRound) {
	s.addErrors(r)
	s.samples = append(s.samples, r.samples...)
	s.sent += r.sent
	if r.elapsed > 0 {
		s.rates = append(s.rates, float64(len(r.samples))/r.elapsed.Seconds())
	}
	s.peakInFlight = max(s.peakInFlight, r.peakInFlight)
	s.peakRSS = max(s.peakRSS, r.peakRSS)
	s.cpu += r.cpu
	s.steadyConns += r.steadyConns
	s.steadyWindow += r.steadyWindow
	if r.mid.ok {
		s.mid = r.mid
	}
}

// perCall is what one call in flight adds to Tollgate's goroutines, live heap and stacks, in
// the middle of the steady load; ok is false without a reading.
func (s *side) perCall() (goroutines, heap, stack float64, ok bool) {
	m, i := s.mid, s.idleRuntime
	if !m.ok || !i.ok || m.inFlight == 0 {
		return 0, 0, 0, false
	}
	n := float64(m.inFlight)
	return (m.goroutines - i.goroutines) / n, (m.heapAlloc - i.heapAlloc) / n, (m.stackInuse - i.stackInuse) / n, true
}

// figures are what the report shows of a side.
type figures struct {
	rps                float64 // median round
	added50, added99   time.Duration
	perCall            float64 // bytes of RSS per call in flight
	cpuPerCall         time.Duration
	connsPerSec        float64
	peakRSS            int64
	peakInFlight, errs int
	sent               int
}

func (s *side) figures(hold time.Duration) figures {
	f := figures{peakRSS: s.peakRSS, peakInFlight: int(s.peakInFlight), errs: s.errs, sent: s.sent}
	total := make([]time.Duration, len(s.samples))
	for i, sm := range s.samples {
		total[i] = sm.total
	}
	slices.Sort(total)
	f.added50, f.added99 = quantile(total, 0.50)-hold, quantile(total, 0.99)-hold
	if len(s.rates) > 0 {
		rates := slices.Clone(s.rates)
		slices.Sort(rates)
		f.rps = rates[len(rates)/2]
	}
	if s.peakInFlight > 0 {
		f.perCall = float64(s.peakRSS-s.idleRSS) / float64(s.peakInFlight)
	}
	if s.sent > 0 {
		f.cpuPerCall = s.cpu / time.Duration(s.sent)
	}
	if s.steadyWindow > 0 {
		f.connsPerSec = float64(s.steadyConns) / s.steadyWindow.Seconds()
	}
	return f
}

// groupResult is one group's two sides.
type groupResult struct {
	group                 group
	sides                 [2]side // proxy, Tollgate
	loadBefore, loadAfter string
	notes                 []string // what went wrong with the processes themselves
	slowStop              string   // how long Tollgate took to stop, when that was long
}

// runGroup starts fresh processes for g, gives each target an unrecorded warm-up round (its
// connections, stacks and heap reach their working size; its errors still count), then the
// measured rounds, proxy and Tollgate taking turns.
func runGroup(ctx context.Context, o inflightOptions, g group, name, logDir string, stderr io.Writer) (res groupResult, err error) {
	ps, err := startGroup(o, g, name, logDir)
	if err != nil {
		return res, err
	}
	res = groupResult{group: g, loadBefore: loadAverage()}
	backend := newStatsClient("http://" + ps.fakellm.addr)
	procs := [2]*proc{ps.proxy, ps.tollgate}
	targets := [2]*target{
		newTarget("proxy", "http://"+ps.proxy.addr, benchModel, capacityFor(g)),
		newTarget("tollgate", "http://"+ps.tollgate.addr, benchProvider+"/"+benchModel, capacityFor(g)),
	}
	// The servers close their ends first (ps.stop), so the TIME_WAIT entries stay on their
	// listening ports; the driver's idle connections are only dropped afterwards.
	defer func() {
		// A child that fails to stop in time (it was killed) is a finding of the run, not a
		// reason to lose the figures: it goes into the report.
		slow, serr := ps.stop()
		if serr != nil {
			res.notes = append(res.notes, serr.Error())
		}
		res.slowStop = slow
		backend.client.CloseIdleConnections()
		for _, t := range targets {
			t.client.CloseIdleConnections()
		}
	}()
	backend.connections() // opens the stats connection before anything is counted
	for j, t := range targets {
		res.sides[j].name = t.name
		if res.sides[j].idleRSS, err = currentRSS(procs[j].cmd.Process.Pid); err != nil {
			return res, err
		}
	}
	metrics := "http://" + ps.tollgate.addr + "/metrics"
	res.sides[1].idleRuntime = scrapeRuntime(metrics)
	probes := [2]func() runtimeStats{nil, func() runtimeStats {
		if o.profile != "" { // the in-process gateway writes its goroutines and heap as they are now
			_ = ps.tollgate.cmd.Process.Signal(syscall.SIGUSR1)
		}
		return scrapeRuntime(metrics)
	}}
	pids := [2]int{procs[0].cmd.Process.Pid, procs[1].cmd.Process.Pid}
	if err := runRounds(ctx, o, g, &res, targets, pids, backend, probes, stderr); err != nil {
		return res, err
	}
	if n := settled(ctx, "http://"+ps.tollgate.addr+"/admin/state", 5*time.Second); n != "" {
		res.notes = append(res.notes, n)
	}
	res.loadAfter = loadAverage()
	return res, nil
}

// runRounds gives each target its warm-up round, which counts only its errors and lasts long
// enough for its calls in flight to reach the measured rounds', then the measured rounds,
// the targets taking turns; it stops early when ctx ends.
func runRounds(ctx context.Context, o inflightOptions, g group, res *groupResult, targets [2]*target, pids [2]int,
	backend *statsClient, probes [2]func() runtimeStats, stderr io.Writer) error {
	warmup := max(o.warmup, g.hold+g.hold/2)
	for j, t := range targets {
		res.sides[j].addErrors(openRound(ctx, t, pids[j], g, warmup, o.chunks, backend, nil))
	}
	for round := range o.rounds {
		for j, t := range targets {
			res.sides[j].add(openRound(ctx, t, pids[j], g, o.duration, o.chunks, backend, probes[j]))
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
		fmt.Fprintf(stderr, "%s: round %d/%d done\n", g, round+1, o.rounds)
	}
	return nil
}

// settled polls Tollgate's /admin/state until nothing runs or waits, which must hold within
// a moment of every call being answered; it returns what it saw otherwise ("" when settled).
func settled(ctx context.Context, url string, within time.Duration) string {
	c := &http.Client{Timeout: 2 * time.Second}
	defer c.CloseIdleConnections()
	deadline := time.Now().Add(within)
	last := "no answer"
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var st struct{ Running, Queued int }
		resp, err := c.Get(url)
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&st)
			resp.Body.Close()
		}
		if err == nil && st.Running == 0 && st.Queued == 0 {
			return ""
		}
		if err == nil {
			last = fmt.Sprintf("%d running, %d queued", st.Running, st.Queued)
		}
		time.Sleep(50 * time.Millisecond) // polling the gateway's state, with a deadline
	}
	return fmt.Sprintf("/admin/state still showed %s %s after the last answer", last, within)
}

// inflightReport is the whole run.
type inflightReport struct {
	groups                        []groupResult
	command                       string
	wall                          time.Duration
	loadBefore, loadAfter         string
	timeWaitBefore, timeWaitAfter int
}

func kib(b float64) string { return fmt.Sprintf("%.1f", b/1024) }

// write prints the report as markdown for docs/benchmarks.md and returns whether every target
// was met.
func (r *inflightReport) write(w io.Writer) bool {
	fmt.Fprintf(w, "Command: `%s` (%s wall; load average before %s, after %s; TCP sockets in TIME_WAIT before %d, after %d)\n\n",
		r.command, r.wall.Round(time.Second), r.loadBefore, r.loadAfter, r.timeWaitBefore, r.timeWaitAfter)
	fmt.Fprintln(w, "| load | target | calls | errors | req/s (median round) | Tollgate/proxy req/s | added p50 / p99 ms | peak in flight | peak RSS MB | RSS KiB per call in flight | CPU µs per call | new backend conns/s, steady | load avg |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, gr := range r.groups {
		p, t := gr.sides[0].figures(gr.group.hold), gr.sides[1].figures(gr.group.hold)
		for j, f := range []figures{p, t} {
			ratio := ""
			if j == 1 {
				ratio = fmt.Sprintf("%.3f", t.rps/max(p.rps, 1e-9))
			}
			fmt.Fprintf(w, "| %s | %s | %d | %d | %.0f | %s | %s / %s | %d | %.0f | %s | %.0f | %.1f | %s → %s |\n",
				gr.group, gr.sides[j].name, f.sent, f.errs, f.rps, ratio, signedMS(f.added50), signedMS(f.added99),
				f.peakInFlight, float64(f.peakRSS)/(1<<20), kib(f.perCall), float64(f.cpuPerCall)/float64(time.Microsecond),
				f.connsPerSec, gr.loadBefore, gr.loadAfter)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Tollgate's runtime in the middle of the steady load (its /metrics, less the idle process's, over the driver's calls in flight then):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| load | calls in flight | goroutines per call | heap allocated KiB per call (live and not yet collected) | stack KiB per call |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|")
	for _, gr := range r.groups {
		if gor, heap, stack, ok := gr.sides[1].perCall(); ok {
			fmt.Fprintf(w, "| %s | %d | %.2f | %s | %s |\n", gr.group, gr.sides[1].mid.inFlight, gor, kib(heap), kib(stack))
		}
	}
	fmt.Fprintln(w)
	return r.writeTargets(w)
}

// writeTargets judges the in-flight targets: throughput, p99 and CPU at the highest rate of the
// shortest hold; memory per call in flight at the longest hold; no backend dials at steady
// load anywhere; no errors anywhere.
func (r *inflightReport) writeTargets(w io.Writer) bool {
	ok := true
	var short, long time.Duration
	top := 0
	for _, gr := range r.groups {
		if short == 0 || gr.group.hold < short {
			short = gr.group.hold
		}
		long = max(long, gr.group.hold)
	}
	for _, gr := range r.groups {
		if gr.group.hold == short {
			top = max(top, gr.group.rate)
		}
	}
	for _, gr := range r.groups {
		g := gr.group
		p, t := gr.sides[0].figures(g.hold), gr.sides[1].figures(g.hold)
		var checks []string
		check := func(met bool, format string, args ...any) {
			ok = ok && met
			checks = append(checks, fmt.Sprintf(format, args...)+" "+verdict(met))
		}
		if g.hold == short && g.rate == top {
			check(t.rps >= minInflightThroughput*p.rps, "req/s %.3f× (≥ %.2f)", t.rps/max(p.rps, 1e-9), minInflightThroughput)
			check(t.added99 <= p.added99+maxAddedP99, "p99 %+.1f ms over the proxy's (≤ +%d)",
				float64(t.added99-p.added99)/msPerDuration, maxAddedP99.Milliseconds())
			check(float64(t.cpuPerCall) <= maxCPURatio*float64(p.cpuPerCall), "CPU per call %.2f× (≤ %.1f)",
				float64(t.cpuPerCall)/max(float64(p.cpuPerCall), 1), maxCPURatio)
			if n := saturation(p); n != "" {
				checks = append(checks, n)
			}
		}
		if g.hold == long && long != short {
			check(t.perCall <= p.perCall+maxExtraPerCall, "RSS per call in flight %+.1f KiB over the proxy's (≤ +%d)",
				(t.perCall-p.perCall)/1024, maxExtraPerCall>>10)
		}
		check(t.connsPerSec == 0, "new backend connections at steady load %.1f/s (none)", t.connsPerSec)
		check(p.errs == 0 && t.errs == 0, "errors %d / %d (none)", p.errs, t.errs)
		for _, n := range gr.notes {
			check(false, "%s", n)
		}
		if gr.slowStop != "" {
			checks = append(checks, gr.slowStop)
		}
		fmt.Fprintf(w, "- %s: %s\n", g, strings.Join(checks, "; "))
	}
	return ok
}

// saturation says so when the proxy's own median call waited longer than the p99 allowance:
// then the machine is past its capacity at this rate for the bare proxy too, both targets
// queue, and the difference of their tails measures how fast two backlogs grow, which moves
// by a second from run to run (docs/benchmarks.md, "The 3,000 RPS tail"). The verdicts stand;
// this tells a reader what the p99 one is worth.
func saturation(proxy figures) string {
	if proxy.added50 <= maxAddedP99 {
		return ""
	}
	return fmt.Sprintf("note: the proxy itself is past this machine's capacity here (its median call waited %+.1f ms beyond the hold), so the p99 comparison measures two growing backlogs",
		float64(proxy.added50)/msPerDuration)
}

// errorReport lists the first errors of every side, for stderr.
func (r *inflightReport) errorReport() string {
	var b strings.Builder
	for _, gr := range r.groups {
		for _, n := range gr.notes {
			fmt.Fprintf(&b, "%s: %s\n", gr.group, n)
		}
		for _, s := range gr.sides {
			for _, m := range s.errMsgs {
				fmt.Fprintf(&b, "%s %s: %s\n", gr.group, s.name, m)
			}
		}
	}
	return b.String()
}
