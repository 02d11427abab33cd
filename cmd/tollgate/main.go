// Command tollgate is the LLM relay gateway. With no flags it serves the embedded default
// (a demo backend plus whatever it discovers) on 127.0.0.1:8080.
//
//	tollgate [--config FILE] [--listen ADDR]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/term"

	"github.com/tollgate/tollgate/cmd/internal/app"
	"github.com/tollgate/tollgate/cmd/internal/config"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "tollgate:", err)
		os.Exit(1)
	}
}

// drainGrace is how long running requests get to finish after SIGINT/SIGTERM.
const drainGrace = 30 * time.Second

func run(args []string) error {
	fs := flag.NewFlagSet("tollgate", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "YAML configuration `file` (default: the embedded demo config plus discovery)")
	listen := fs.String("listen", "", "`address` to serve on, overriding the config (default 127.0.0.1:8080)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := newLogger()
	app.TuneGC()

	var cfg *config.Config
	if *cfgPath != "" {
		var err error
		if cfg, err = config.Load(*cfgPath); err != nil {
			return err
		}
	} else {
		cfg = config.Default(os.LookupEnv, exec.LookPath, config.ProbeTCP)
	}
	if *listen != "" {
		cfg.Listen = *listen
	}
	for _, line := range cfg.Summary() {
		log.Info().Str("config", cfg.Source).Msg(line)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a, err := app.New(ctx, cfg, app.Options{Logger: log})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		_ = a.Drain(context.Background())
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	srv := &http.Server{Handler: a.Handler, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }() // exits when srv is shut down
	log.Info().Str("listen", ln.Addr().String()).Msg("tollgate is serving; try GET /v1/models")

	select {
	case err := <-served:
		_ = a.Drain(context.Background())
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	stop() // a second signal kills at once
	log.Info().Dur("grace", drainGrace).Msg("shutting down: draining running requests")
	drainCtx, cancel := context.WithTimeout(context.Background(), drainGrace)
	defer cancel()
	a.Gateway.Drain()
	if err := srv.Shutdown(drainCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		log.Warn().Err(err).Msg("http shutdown")
	}
	err = a.Drain(drainCtx) // stops what still runs once the grace is over
	_ = srv.Close()
	log.Info().Msg("stopped")
	return err
}

// newLogger writes human-readable lines to a terminal and JSON otherwise.
func newLogger() zerolog.Logger {
	zerolog.TimeFieldFormat = time.RFC3339Nano
	if term.IsTerminal(int(os.Stderr.Fd())) {
		return zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: "15:04:05.000"}).With().Timestamp().Logger()
	}
	return zerolog.New(os.Stderr).With().Timestamp().Logger()
}
