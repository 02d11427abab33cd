package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/cmd/internal/app"
	"github.com/tollgate/tollgate/cmd/internal/config"
	"github.com/tollgate/tollgate/cmd/internal/telemetry"
)

// finalWrite bounds how long, after the drain grace, the handlers of the calls that were
// stopped get to write their final error event before the connections are closed.
const finalWrite = 5 * time.Second

// reloadTimeout bounds one reload started by SIGHUP: reading the file, listing the new
// providers' models and the actors' answers.
const reloadTimeout = time.Minute

// serve runs the gateway until SIGINT or SIGTERM, then drains it (see drain). SIGHUP
// reloads the configuration file (app.App.Reload), as POST /admin/reload does. A gateway
// that fails (its supervisor spent its restart budget) drains too and serve returns the
// cause, so the process exits 1 for its service manager to start a fresh one.
func serve(cfg *config.Config, f flags, log zerolog.Logger) error {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)

	tr, err := telemetry.NewTracing(context.Background(), os.LookupEnv, version())
	if err != nil {
		return err
	}
	defer flushTraces(tr, log)
	o := app.Options{Logger: log, Tracer: tr.Tracer, TraceContent: tr.Content}
	if f.config != "" {
		o.Reload = func() (*config.Config, error) { return loadConfig(f) }
	}
	a, err := app.New(context.Background(), cfg, o)
	if err != nil {
		return err
	}
	if err := injectFaults(a); err != nil {
		_ = a.Drain(context.Background())
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		_ = a.Drain(context.Background())
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	srv := a.Server()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }() // exits when srv is shut down
	log.Info().Msg(metricsSummary(cfg, ln.Addr().String()))
	log.Info().Msg(tr.Summary)
	log.Info().Str("listen", ln.Addr().String()).Msg("tollgate is serving; try GET /v1/models")
	return serveUntilEnd(a, srv, cfg, served, sigs, log)
}

// serveUntilEnd waits while a serves: a SIGHUP reloads, SIGINT or SIGTERM drains, and a
// failed gateway or a server that stops on its own ends the process too.
func serveUntilEnd(a *app.App, srv stopper, cfg *config.Config, served <-chan error, sigs <-chan os.Signal, log zerolog.Logger) error {
	for {
		select {
		case err := <-served:
			_ = a.Drain(context.Background())
			return fmt.Errorf("serve: %w", err)
		case <-a.Gateway.FailedC():
			signal.Reset(os.Interrupt, syscall.SIGTERM)
			return failed(a, srv, cfg.DrainDelay.D(), cfg.DrainGrace.D(), log)
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				// Reloads are serialized by the app; this goroutine exits when its reload
				// returns, within reloadTimeout. The outcome is logged by Reload.
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), reloadTimeout)
					defer cancel()
					_, _ = a.Reload(ctx)
				}()
				continue
			}
			// A second SIGINT or SIGTERM kills at once; SIGHUP stays ignored.
			signal.Reset(os.Interrupt, syscall.SIGTERM)
			delay := cfg.DrainDelay.D()
			if sig == os.Interrupt {
				delay = 0 // a person at a terminal, not a load balancer
			}
			return drain(a, srv, delay, cfg.DrainGrace.D(), log.With().Str("signal", sig.String()).Logger())
		}
	}
}

// failed drains a gateway that failed, as SIGTERM would, and returns its cause. From the
// failure on, /healthz and /readyz answer 503 "failed" and new calls are refused; drain_delay
// gives a load balancer the time to see it before the listener closes.
func failed(a *app.App, srv stopper, delay, grace time.Duration, log zerolog.Logger) error {
	cause := a.Gateway.Failed()
	log.Error().Err(cause).Msg("the gateway failed and admits nothing; draining, then exiting with status 1 for the service manager to start it afresh")
	if err := drain(a, srv, delay, grace, log.With().Str("cause", "gateway_failed").Logger()); err != nil {
		log.Warn().Err(err).Msg("drain after the failure")
	}
	return fmt.Errorf("gateway failed: %w", cause)
}

// metricsSummary says where metrics are and who may read them, for the start-up log.
func metricsSummary(cfg *config.Config, addr string) string {
	who := "open (no keys configured)"
	switch {
	case cfg.Metrics.Public:
		who = "public (metrics.public: true)"
	case len(cfg.Auth.AdminKeys) > 0:
		who = "admin key required"
	case len(cfg.Auth.APIKeys) > 0:
		who = "admin key required (the api keys, as no admin_keys are set)"
	}
	return fmt.Sprintf("metrics: GET http://%s/metrics, Prometheus text format, %s", addr, who)
}

// flushTraces exports the spans still buffered, for at most a few seconds.
func flushTraces(tr *telemetry.Tracing, log zerolog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		log.Warn().Err(err).Msg("exporting the last traces")
	}
}

// stopper is the HTTP server drain stops (app.App.Server's).
type stopper interface {
	Shutdown(context.Context) error
	Close() error
	Wait(context.Context) error
}

// drain shuts the gateway down the way load balancers need it:
//  1. /readyz answers 503 "draining" while everything is still accepted and served, for
//     delay, so the balancer takes the instance out before a connection is refused;
//  2. the gateway stops admitting (503 gateway_draining on connections still open) and the
//     listener closes; running calls get grace to finish;
//  3. at the end of grace what still runs is stopped: every open stream gets the final
//     SPEC §4 error event (gateway_draining), every answer not yet started a 503, and the
//     handlers get finalWrite to write them before the connections are closed;
//  4. it returns once every handler has returned and logged its request (at most finalWrite
//     more), so the process does not exit before the last request's log line.
func drain(a *app.App, srv stopper, delay, grace time.Duration, log zerolog.Logger) error {
	a.Unready()
	log.Info().Dur("drain_delay", delay).Dur("drain_grace", grace).Msg("draining: /readyz answers 503; still serving until drain_delay ends")
	if delay > 0 {
		<-time.After(delay)
	}
	log.Info().Msg("draining: admitting nothing new, listener closed; running requests have drain_grace to finish")
	a.Gateway.Drain()
	graceCtx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(graceCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		log.Warn().Err(err).Msg("http shutdown")
	}
	err := a.Drain(graceCtx) // at the deadline: stops what still runs, which answers its clients
	finalCtx, cancelFinal := context.WithTimeout(context.Background(), finalWrite)
	defer cancelFinal()
	if serr := srv.Shutdown(finalCtx); serr != nil && !errors.Is(serr, context.DeadlineExceeded) {
		log.Warn().Err(serr).Msg("http shutdown")
	}
	_ = srv.Close() // what did not end within finalWrite
	// A handler blocked writing to a client that reads nothing returns once Close fails
	// its write, and then logs its request: the process must not exit before that.
	waitCtx, cancelWait := context.WithTimeout(context.Background(), finalWrite)
	defer cancelWait()
	if werr := srv.Wait(waitCtx); werr != nil {
		log.Warn().Err(werr).Msg("handlers still running after the connections closed")
	}
	log.Info().Msg("stopped")
	return err
}
