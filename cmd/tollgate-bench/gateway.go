package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/cmd/internal/app"
	"github.com/tollgate/tollgate/cmd/internal/config"
	"github.com/tollgate/tollgate/cmd/internal/telemetry"
)

// serveGateway is `tollgate-bench gateway`: Tollgate wired exactly as cmd/tollgate wires it
// (app.TuneGC, config.Load, app.New, tracing from the OTEL_* environment, JSON logs on
// stderr), plus, with --profile-dir, CPU, heap and mutex profiles written at shutdown. The
// benchmark runs it instead of the tollgate binary when --profile is given, so the profile
// shows where a benchmark's time goes, and for --telemetry, where --no-metrics is the baseline.
func serveGateway(args []string) error {
	fs := flag.NewFlagSet("tollgate-bench gateway", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "YAML configuration `file`")
	listen := fs.String("listen", "127.0.0.1:0", "address to serve on")
	dir := fs.String("profile-dir", "", "directory for tollgate.cpu.pprof, tollgate.heap.pprof and tollgate.mutex.pprof; \"\": no profiles")
	noMetrics := fs.Bool("no-metrics", false, "count nothing and serve no /metrics (the baseline of --telemetry)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	app.TuneGC()
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	cfg.Listen = *listen
	zerolog.TimeFieldFormat = time.RFC3339Nano
	log := zerolog.New(os.Stderr).With().Timestamp().Logger()
	tr, err := telemetry.NewTracing(context.Background(), os.LookupEnv, "bench")
	if err != nil {
		return err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tr.Shutdown(ctx)
	}()
	log.Info().Msg(tr.Summary)
	a, err := app.New(context.Background(), cfg, app.Options{Logger: log, Tracer: tr.Tracer, TraceContent: tr.Content, NoMetrics: *noMetrics})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		_ = a.Drain(context.Background())
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	if *dir == "" {
		fmt.Printf("listening on %s\n", ln.Addr())
		serveErr := serveUntilSignal(a.Server(), ln)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return errors.Join(serveErr, a.Drain(ctx))
	}
	return serveProfiled(a, ln, *dir)
}

// serveProfiled serves a on ln until a signal with the CPU profile running and the mutex
// profile sampling, then writes the CPU, heap and mutex profiles into dir and drains a.
func serveProfiled(a *app.App, ln net.Listener, dir string) error {
	cpu, err := os.Create(dir + "/tollgate.cpu.pprof")
	if err != nil {
		return fmt.Errorf("cpu profile: %w", err)
	}
	defer cpu.Close()
	if err := pprof.StartCPUProfile(cpu); err != nil {
		return fmt.Errorf("cpu profile: %w", err)
	}
	runtime.SetMutexProfileFraction(10)
	stopDumps := dumpOnSignal(dir)
	defer stopDumps()
	fmt.Printf("listening on %s\n", ln.Addr())
	serveErr := serveUntilSignal(a.Server(), ln)
	pprof.StopCPUProfile()
	profErr := errors.Join(writeProfile("heap", dir+"/tollgate.heap.pprof"),
		writeProfile("mutex", dir+"/tollgate.mutex.pprof"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return errors.Join(serveErr, profErr, a.Drain(ctx))
}

func writeProfile(name, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("%s profile: %w", name, err)
	}
	defer f.Close()
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		return fmt.Errorf("%s profile: %w", name, err)
	}
	return nil
}

// dumpOnSignal writes the goroutine and heap profiles as they are now to dir each time the
// process gets SIGUSR1 (tollgate.goroutine.txt, tollgate.heap-now.pprof), then an execution
// trace of the second that follows (tollgate.trace), to look inside a benchmark while it
// holds its calls; the returned stop ends that. `go tool trace -pprof=sched` turns the trace
// into where goroutines waited for a CPU, by the stack that made them runnable.
func dumpOnSignal(dir string) (stop func()) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	done := make(chan struct{})
	go func() { // exits when stop closes done
		for {
			select {
			case <-done:
				return
			case <-sig:
				if f, err := os.Create(dir + "/tollgate.goroutine.txt"); err == nil {
					_ = pprof.Lookup("goroutine").WriteTo(f, 1)
					f.Close()
				}
				_ = writeProfile("heap", dir+"/tollgate.heap-now.pprof")
				writeTrace(dir+"/tollgate.trace", time.Second)
			}
		}
	}()
	return func() { signal.Stop(sig); close(done) }
}

// writeTrace records the runtime's execution trace for d into path; errors leave no trace.
func writeTrace(path string, d time.Duration) {
	f, err := os.Create(path)
	if err != nil {
		return
	}
	defer f.Close()
	if trace.Start(f) != nil {
		return
	}
	time.Sleep(d) // the span recorded, not a synchronization
	trace.Stop()
}
