package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

// result is one scenario run's report.
type result struct {
	Scenario string         `json:"scenario"`
	Setup    string         `json:"setup"`
	Requests int            `json:"requests"`
	Codes    map[string]int `json:"codes"`
	QueueMs  summary        `json:"queue_ms"`
	TTFBMs   summary        `json:"ttfb_ms"`
	TotalMs  summary        `json:"total_ms"`
	Seconds  float64        `json:"seconds"`
	// Figures are scenario-specific measurements (rejections per second, bytes per queued
	// request, backend counters), printed as they are.
	Figures map[string]float64 `json:"figures,omitempty"`
	// Targets are performance goals: met or missed, reported but not breaches (a busy CI
	// machine must not fail the build on speed).
	Targets []target `json:"targets,omitempty"`
	// Breaches are broken invariants; any one makes the harness exit non-zero.
	Breaches []string `json:"breaches"`
}

type target struct {
	What string  `json:"what"`
	Got  float64 `json:"got"`
	Want string  `json:"want"`
	Met  bool    `json:"met"`
}

// summary is a distribution in milliseconds.
type summary struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

func newResult(scenario, setup string) *result {
	return &result{Scenario: scenario, Setup: setup, Codes: map[string]int{}, Figures: map[string]float64{},
		Breaches: []string{}}
}

func (r *result) breach(format string, args ...any) {
	r.Breaches = append(r.Breaches, fmt.Sprintf(format, args...))
}

func (r *result) target(what string, got float64, want string, met bool) {
	r.Targets = append(r.Targets, target{What: what, Got: got, Want: want, Met: met})
}

// add counts the outcomes and their timing; malformed answers become breaches (the first
// few verbatim, then a count, so a systematic fault does not flood the report).
func (r *result) add(outs []outcome) {
	var queue, ttfb, total []float64
	malformed := 0
	for _, o := range outs {
		r.Requests++
		r.Codes[o.label()]++
		if o.breach != "" {
			malformed++
			if malformed <= 5 {
				r.breach("%s (model %s, stream %v): %s", o.label(), o.call.model, o.call.stream, o.breach)
			}
		}
		if o.cancelled {
			continue
		}
		if o.queueMs >= 0 {
			queue = append(queue, float64(o.queueMs))
		}
		if o.ttfb > 0 {
			ttfb = append(ttfb, ms(o.ttfb))
		}
		total = append(total, ms(o.total))
	}
	if malformed > 5 {
		r.breach("%d malformed answers in all", malformed)
	}
	r.QueueMs, r.TTFBMs, r.TotalMs = summarize(queue), summarize(ttfb), summarize(total)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// summarize returns nearest-rank percentiles of xs (which it sorts).
func summarize(xs []float64) summary {
	if len(xs) == 0 {
		return summary{}
	}
	sort.Float64s(xs)
	return summary{N: len(xs), P50: percentile(xs, 50), P90: percentile(xs, 90), P99: percentile(xs, 99), Max: xs[len(xs)-1]}
}

// percentile is the nearest-rank percentile of sorted xs: the smallest value with at least
// p% of the values at or below it.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// printText writes the human-readable report.
func printText(w io.Writer, rs []*result) {
	for _, r := range rs {
		status := "ok"
		if len(r.Breaches) > 0 {
			status = fmt.Sprintf("BREACHED (%d)", len(r.Breaches))
		}
		fmt.Fprintf(w, "== %s [%s]: %d requests in %.2fs: %s\n", r.Scenario, r.Setup, r.Requests, r.Seconds, status)
		codes := make([]string, 0, len(r.Codes))
		for c := range r.Codes {
			codes = append(codes, c)
		}
		slices.Sort(codes)
		for _, c := range codes {
			fmt.Fprintf(w, "   %-40s %6d\n", c, r.Codes[c])
		}
		for _, s := range []struct {
			name string
			s    summary
		}{{"queue wait ms", r.QueueMs}, {"ttfb ms", r.TTFBMs}, {"total ms", r.TotalMs}} {
			if s.s.N > 0 {
				fmt.Fprintf(w, "   %-14s p50 %8.2f  p90 %8.2f  p99 %8.2f  max %8.2f  (n=%d)\n",
					s.name, s.s.P50, s.s.P90, s.s.P99, s.s.Max, s.s.N)
			}
		}
		figs := make([]string, 0, len(r.Figures))
		for k := range r.Figures {
			figs = append(figs, k)
		}
		slices.Sort(figs)
		for _, k := range figs {
			fmt.Fprintf(w, "   %-40s %12.1f\n", k, r.Figures[k])
		}
		for _, t := range r.Targets {
			mark := "met"
			if !t.Met {
				mark = "MISSED"
			}
			fmt.Fprintf(w, "   target %-33s %12.2f  want %s: %s\n", t.What, t.Got, t.Want, mark)
		}
		for _, b := range r.Breaches {
			fmt.Fprintf(w, "   BREACH: %s\n", strings.TrimSpace(b))
		}
	}
}

func printJSON(w io.Writer, rs []*result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rs)
}
