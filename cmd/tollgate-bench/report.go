package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// The relay's targets, against the bare proxy.
const (
	maxAddedP50Ratio = 1.3       // Tollgate's added p50 over the proxy's
	minThroughput    = 0.8       // Tollgate's requests/s over the proxy's
	maxPeakRSS       = 100 << 20 // bytes
	targetStreams    = 10000     // Tollgate streams in a default run
	msPerDuration    = float64(time.Millisecond)
)

// workload is one kind of request at one concurrency.
type workload struct {
	stream bool
	conc   int
	n      int // requests per target per round
}

func (w workload) String() string {
	kind := "non-stream"
	if w.stream {
		kind = "stream"
	}
	return fmt.Sprintf("%s c=%d", kind, w.conc)
}

// matches reports whether every word of only ("stream", "non-stream", "c=50") names w.
func (w workload) matches(only string) bool {
	words := strings.Fields(w.String())
	for _, f := range strings.Fields(only) {
		if !slices.Contains(words, f) {
			return false
		}
	}
	return true
}

// tally accumulates one target's batches for one workload over all rounds.
type tally struct {
	samples []sample
	errs    int
	errMsgs []string
	rates   []float64 // requests/s of each round
}

// addErrors counts a warm-up batch's failures but not its timings.
func (t *tally) addErrors(b batch) {
	t.errs += b.errs
	for _, m := range b.errMsgs {
		if len(t.errMsgs) < maxErrMsgs {
			t.errMsgs = append(t.errMsgs, m)
		}
	}
}

func (t *tally) add(b batch) {
	t.samples = append(t.samples, b.samples...)
	t.errs += b.errs
	if b.elapsed > 0 {
		t.rates = append(t.rates, float64(len(b.samples))/b.elapsed.Seconds())
	}
	for _, m := range b.errMsgs {
		if len(t.errMsgs) < maxErrMsgs {
			t.errMsgs = append(t.errMsgs, m)
		}
	}
}

// summary is what the tables show of a tally.
type summary struct {
	p50, p99, first50 time.Duration
	rps               float64
	n, errs           int
}

func (t *tally) summary() summary {
	total := make([]time.Duration, len(t.samples))
	first := make([]time.Duration, len(t.samples))
	for i, s := range t.samples {
		total[i], first[i] = s.total, s.first
	}
	slices.Sort(total)
	slices.Sort(first)
	s := summary{p50: quantile(total, 0.50), p99: quantile(total, 0.99), first50: quantile(first, 0.50),
		n: len(t.samples) + t.errs, errs: t.errs}
	// The median round, not the total: a burst of load from outside the benchmark hits one
	// target's round, and interleaving only makes that fair if one round cannot dominate.
	if len(t.rates) > 0 {
		rates := slices.Clone(t.rates)
		slices.Sort(rates)
		s.rps = rates[len(rates)/2]
	}
	return s
}

// quantile returns the q-quantile of sorted by the nearest-rank method; 0 when empty.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// results holds every tally, by workload index and target index (direct, proxy, tollgate).
type results struct {
	workloads []workload
	tallies   [][3]tally
	// Process figures, read at the end of the run.
	tollgateRSS, proxyRSS int64
	tollgateCPU, proxyCPU time.Duration
	tollgateReqs          int // requests Tollgate served (warm-up included), for CPU per request
	proxyReqs             int
	wall                  time.Duration
	loadBefore, loadAfter string // /proc/loadavg: the machine is shared with whatever else runs
	command               string
	quick                 bool
	sampler               string // --telemetry: the "on" gateway's trace sampler
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f", float64(d)/msPerDuration) }

func signedMS(d time.Duration) string { return fmt.Sprintf("%+.3f", float64(d)/msPerDuration) }

func verdict(ok bool) string {
	if ok {
		return "ok"
	}
	return "**MISS**"
}

// write prints the report as markdown that docs/benchmarks.md can take verbatim. It returns
// whether every target was met.
func (r *results) write(w io.Writer) bool {
	names := [3]string{"direct (a)", "proxy (b)", "Tollgate (c)"}
	fmt.Fprintf(w, "Command: `%s` (%s wall; load average before %s, after %s)\n\n",
		r.command, r.wall.Round(time.Second), r.loadBefore, r.loadAfter)
	fmt.Fprintln(w, "| workload | target | requests | p50 ms | p99 ms | first byte/event p50 ms | req/s (median round) | errors |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|")
	for i, wl := range r.workloads {
		for j := range 3 {
			s := r.tallies[i][j].summary()
			fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s | %.0f | %d |\n",
				wl, names[j], s.n, ms(s.p50), ms(s.p99), ms(s.first50), s.rps, s.errs)
		}
	}
	fmt.Fprintln(w)
	allOK := r.writeOverhead(w)
	fmt.Fprintln(w)
	return r.writeTotals(w) && allOK
}

// writeOverhead prints the added latency against direct and the throughput ratios.
func (r *results) writeOverhead(w io.Writer) bool {
	fmt.Fprintln(w, "Added latency is against direct (a); each cell is proxy / Tollgate.")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "| workload | added p50 ms | Tollgate/proxy added p50 (≤ %.1f) | added p99 ms | added first byte/event p50 ms | req/s vs direct | Tollgate/proxy req/s (≥ %.1f) |\n",
		maxAddedP50Ratio, minThroughput)
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
	ok := true
	for i, wl := range r.workloads {
		a, b, c := r.tallies[i][0].summary(), r.tallies[i][1].summary(), r.tallies[i][2].summary()
		addB, addC := b.p50-a.p50, c.p50-a.p50
		ratio := float64(addC) / float64(max(addB, time.Microsecond))
		tput := c.rps / max(b.rps, 1e-9)
		p50OK, tputOK := ratio <= maxAddedP50Ratio, tput >= minThroughput
		tputVerdict := verdict(tputOK)
		if wl.conc == 1 {
			// One request at a time measures latency again, not capacity: shown, not judged.
			tputOK, tputVerdict = true, "(latency-bound)"
		}
		ok = ok && p50OK && tputOK
		fmt.Fprintf(w, "| %s | %s / %s | %.2f %s | %s / %s | %s / %s | %.2f× / %.2f× | %.2f %s |\n", wl,
			signedMS(addB), signedMS(addC), ratio, verdict(p50OK),
			signedMS(b.p99-a.p99), signedMS(c.p99-a.p99),
			signedMS(b.first50-a.first50), signedMS(c.first50-a.first50),
			b.rps/max(a.rps, 1e-9), c.rps/max(a.rps, 1e-9), tput, tputVerdict)
	}
	return ok
}

// writeTotals prints stream errors, peak RSS and CPU per request.
func (r *results) writeTotals(w io.Writer) bool {
	streams, streamErrs, errs := 0, 0, 0
	for i, wl := range r.workloads {
		for j := range 3 {
			errs += r.tallies[i][j].errs
		}
		if wl.stream {
			s := r.tallies[i][2].summary()
			streams += s.n
			streamErrs += s.errs
		}
	}
	ok := streamErrs == 0 && r.tollgateRSS < maxPeakRSS && errs == 0
	streamsNote := ""
	if !r.quick {
		ok = ok && streams >= targetStreams
		streamsNote = fmt.Sprintf(" (≥ %d: %s)", targetStreams, verdict(streams >= targetStreams))
	}
	fmt.Fprintf(w, "- Tollgate streams: %d%s; stream errors: %d (%s); errors on any target: %d\n",
		streams, streamsNote, streamErrs, verdict(streamErrs == 0), errs)
	fmt.Fprintf(w, "- Peak RSS (VmHWM): Tollgate %.1f MB (< %d MB: %s), proxy %.1f MB\n",
		float64(r.tollgateRSS)/(1<<20), maxPeakRSS>>20, verdict(r.tollgateRSS < maxPeakRSS), float64(r.proxyRSS)/(1<<20))
	if r.tollgateReqs > 0 && r.proxyReqs > 0 {
		fmt.Fprintf(w, "- CPU per request (user+sys, all workloads): Tollgate %.0f µs, proxy %.0f µs\n",
			float64(r.tollgateCPU.Microseconds())/float64(r.tollgateReqs),
			float64(r.proxyCPU.Microseconds())/float64(r.proxyReqs))
	}
	return ok
}

// errorReport lists the first errors of every tally, for stderr.
func (r *results) errorReport() string {
	var b strings.Builder
	names := [3]string{"direct", "proxy", "tollgate"}
	for i, wl := range r.workloads {
		for j := range 3 {
			for _, m := range r.tallies[i][j].errMsgs {
				fmt.Fprintf(&b, "%s %s: %s\n", wl, names[j], m)
			}
		}
	}
	return b.String()
}
