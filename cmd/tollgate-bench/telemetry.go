package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// --telemetry: what metrics counting and OTLP tracing cost. Two Tollgates, wired
// as cmd/tollgate wires them (`tollgate-bench gateway`), relay to the same fake backend: "off"
// counts nothing (--no-metrics) and traces nothing; "on" counts every request and is scraped
// at GET /metrics every second, and with --telemetry all also exports every span
// (OTEL_TRACES_SAMPLER=always_on) over OTLP/HTTP to a receiver in this process, which reads
// and acknowledges each export. The rounds interleave direct, off, on, so drift and the
// machine's other jobs hit both alike.

// maxTelemetryCost is the throughput on may lose against off.
const maxTelemetryCost = 0.05

// otlpReceiver acknowledges OTLP/HTTP trace exports and counts them.
type otlpReceiver struct {
	srv            *http.Server
	addr           string
	exports, bytes atomic.Int64
	done           chan struct{}
}

func startReceiver() (*otlpReceiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("otlp receiver: %w", err)
	}
	r := &otlpReceiver{addr: ln.Addr().String(), done: make(chan struct{})}
	r.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
			http.NotFound(w, req)
			return
		}
		n, _ := io.Copy(io.Discard, req.Body)
		r.exports.Add(1)
		r.bytes.Add(n)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK) // an empty ExportTraceServiceResponse: all accepted
	})}
	go func() { defer close(r.done); _ = r.srv.Serve(ln) }() // exits when stop shuts the server down
	return r, nil
}

func (r *otlpReceiver) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = r.srv.Shutdown(ctx)
	<-r.done
}

// scraper reads GET /metrics every second, as Prometheus would, until stopped.
type scraper struct {
	scrapes, failures atomic.Int64
	stop              context.CancelFunc
	wg                sync.WaitGroup
}

func startScraper(url string) *scraper {
	ctx, cancel := context.WithCancel(context.Background())
	s := &scraper{stop: cancel}
	s.wg.Go(func() { // exits when stop cancels ctx
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/metrics", nil)
			res, err := http.DefaultClient.Do(req)
			if ctx.Err() != nil {
				if res != nil {
					res.Body.Close()
				}
				return // stopped mid-scrape: not the gateway's failure
			}
			if err != nil || res.StatusCode != http.StatusOK {
				s.failures.Add(1)
			} else {
				s.scrapes.Add(1)
			}
			if res != nil {
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
		}
	})
	return s
}

// startTelemetry starts the backend and the two gateways; the procs' proxy slot is "off" and
// its tollgate slot "on".
func startTelemetry(o options, logDir string, recv *otlpReceiver) (*procs, error) {
	ps := &procs{offModel: benchProvider + "/" + benchModel}
	var err error
	ps.fakellm, err = startProc("fakellm", logDir, listeningLine, o.fakellm, "--listen", "127.0.0.1:0", "--chunks", fmt.Sprint(o.chunks))
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(logDir, "tollgate.yaml")
	if err := os.WriteFile(cfg, []byte(tollgateConfig("http://"+ps.fakellm.addr+"/v1")), 0o644); err != nil {
		return nil, errors.Join(fmt.Errorf("write config: %w", err), ps.stop())
	}
	off := []string{"OTEL_SDK_DISABLED=true"}
	ps.proxy, err = startProcEnv("tollgate-off", logDir, tollgateLine, off, o.self, "gateway", "--config", cfg, "--no-metrics")
	if err != nil {
		return nil, errors.Join(err, ps.stop())
	}
	// Every span is recorded and exported unless the bench's own environment names another
	// sampler (OTEL_TRACES_SAMPLER=parentbased_traceidratio OTEL_TRACES_SAMPLER_ARG=0.1).
	on := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + recv.addr, "OTEL_BSP_SCHEDULE_DELAY=1000", "OTEL_SDK_DISABLED=false",
		"OTEL_TRACES_SAMPLER=" + cmp.Or(os.Getenv("OTEL_TRACES_SAMPLER"), "always_on")}
	if o.telemetry == "metrics" {
		on = off // counting only: what SPEC §15 asks to cost nothing measurable
	}
	args := []string{"gateway", "--config", cfg}
	if o.profile != "" { // --profile: where the "on" gateway's time goes
		if err := os.MkdirAll(o.profile, 0o755); err != nil {
			return nil, errors.Join(err, ps.stop())
		}
		args = append(args, "--profile-dir", o.profile)
	}
	ps.tollgate, err = startProcEnv("tollgate-on", logDir, tollgateLine, on, o.self, args...)
	if err != nil {
		return nil, errors.Join(err, ps.stop())
	}
	return ps, nil
}

// benchTelemetry runs the on/off comparison and writes its report.
func benchTelemetry(ctx context.Context, o options, logDir string, stdout, stderr io.Writer) error {
	recv, err := startReceiver()
	if err != nil {
		return err
	}
	defer recv.stop()
	ps, err := startTelemetry(o, logDir, recv)
	if err != nil {
		return err
	}
	sc := startScraper("http://" + ps.tollgate.addr)
	r := measure(ctx, o, ps, stderr)
	r.sampler = "none (metrics only)"
	if o.telemetry == "all" {
		r.sampler = cmp.Or(os.Getenv("OTEL_TRACES_SAMPLER"), "always_on")
		if arg := os.Getenv("OTEL_TRACES_SAMPLER_ARG"); arg != "" {
			r.sampler += " " + arg
		}
	}
	sc.stop()
	sc.wg.Wait()
	r.tollgateCPU, _ = cpuTime(ps.tollgate.cmd.Process.Pid)
	r.proxyCPU, _ = cpuTime(ps.proxy.cmd.Process.Pid)
	stopErr := ps.stop() // "on" flushes its last spans as it stops
	if ctx.Err() != nil {
		return ctx.Err()
	}
	err = emit(&telemetryReport{r, recv, sc}, o.out, o.strict, stdout, stderr)
	if err == nil && (o.telemetry == "all" && recv.exports.Load() == 0 || sc.scrapes.Load() == 0) {
		err = fmt.Errorf("telemetry was not on: %d span exports, %d scrapes", recv.exports.Load(), sc.scrapes.Load())
	}
	return errors.Join(err, stopErr)
}

// telemetryReport is the --telemetry run as a benchReport.
type telemetryReport struct {
	*results
	recv *otlpReceiver
	sc   *scraper
}

func (t *telemetryReport) write(w io.Writer) bool { return t.writeTelemetry(w, t.recv, t.sc) }

// writeTelemetry prints the on/off table; it returns whether every workload's throughput
// with telemetry on is within maxTelemetryCost of off.
func (r *results) writeTelemetry(w io.Writer, recv *otlpReceiver, sc *scraper) bool {
	fmt.Fprintf(w, "Command: `%s` (%s wall; load average before %s, after %s)\n\n",
		r.command, r.wall.Round(time.Second), r.loadBefore, r.loadAfter)
	fmt.Fprintln(w, "| workload | requests off / on | p50 ms off / on | req/s off (median round) | req/s on | on/off | within 5% |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---|")
	all := true
	for i, wl := range r.workloads {
		off, on := r.tallies[i][1].summary(), r.tallies[i][2].summary()
		ratio := 0.0
		if off.rps > 0 {
			ratio = on.rps / off.rps
		}
		ok := ratio >= 1-maxTelemetryCost
		all = all && ok
		fmt.Fprintf(w, "| %s | %d / %d | %s / %s | %.0f | %.0f | %.3f | %s |\n",
			wl, off.n, on.n, ms(off.p50), ms(on.p50), off.rps, on.rps, ratio, verdict(ok))
	}
	fmt.Fprintln(w)
	served := r.proxyReqs
	if served > 0 && r.tollgateReqs > 0 {
		fmt.Fprintf(w, "- CPU per request (user+sys): off %.0f µs, on %.0f µs\n",
			float64(r.proxyCPU.Microseconds())/float64(served), float64(r.tollgateCPU.Microseconds())/float64(r.tollgateReqs))
	}
	fmt.Fprintf(w, "- on: sampler %s; %d OTLP/HTTP exports received (%.1f MB of spans), %d scrapes of /metrics (%d failed)\n",
		r.sampler, recv.exports.Load(), float64(recv.bytes.Load())/1e6, sc.scrapes.Load(), sc.failures.Load())
	return all
}
