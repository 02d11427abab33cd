// Command tollgate is the LLM relay gateway. With no flags it serves the embedded default
// (a demo backend plus whatever it discovers) on 127.0.0.1:8080.
//
//	tollgate [--config FILE] [--listen ADDR]
//	tollgate --check-config FILE
//	tollgate --version | --help
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/term"

	"github.com/tollgate/tollgate/cmd/internal/app"
	"github.com/tollgate/tollgate/cmd/internal/config"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "tollgate:", err)
		os.Exit(1)
	}
}

// flags is the parsed command line.
type flags struct {
	config, listen, checkConfig string
	version                     bool
}

const usageText = `Usage:
  tollgate [--config FILE] [--listen ADDR]   serve (default: the embedded demo config plus discovery)
  tollgate --check-config FILE               validate FILE, print its summary; exit 1 on errors
  tollgate --version                         print the version, commit and Go version
  tollgate --help                            print this help

Flags:
`

// parseFlags reads the command line. --help prints the usage to out and returns flag.ErrHelp;
// an unknown flag or a stray argument is an error saying which.
func parseFlags(args []string, out io.Writer) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("tollgate", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are returned, the usage printed only when asked for
	fs.StringVar(&f.config, "config", "", "YAML configuration `file` (default: the embedded demo config plus discovery)")
	fs.StringVar(&f.listen, "listen", "", "`address` to serve on, overriding the config (default 127.0.0.1:8080)")
	fs.StringVar(&f.checkConfig, "check-config", "", "validate the configuration `file`, print its summary and exit")
	fs.BoolVar(&f.version, "version", false, "print the version and exit")
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(out, usageText)
		fs.VisitAll(func(fl *flag.Flag) {
			arg, usage := flag.UnquoteUsage(fl)
			fmt.Fprintf(out, "  %s\n    \t%s\n", strings.TrimSpace("--"+fl.Name+" "+arg), usage)
		})
		return f, err
	case err != nil:
		return f, fmt.Errorf("%w (tollgate --help lists the flags)", err)
	case fs.NArg() > 0:
		return f, fmt.Errorf("unexpected argument %q: tollgate takes flags only (tollgate --help lists them)", fs.Arg(0))
	case f.checkConfig != "" && (f.config != "" || f.listen != ""):
		return f, errors.New("--check-config takes the file to check and no other flag")
	}
	return f, nil
}

func run(args []string, out io.Writer) error {
	f, err := parseFlags(args, out)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return nil
	case err != nil:
		return err
	case f.version:
		fmt.Fprintln(out, versionLine())
		return nil
	case f.checkConfig != "":
		return checkConfig(f.checkConfig, out)
	}
	log := newLogger()
	gc := app.TuneGC()
	cfg, err := loadConfig(f)
	if err != nil {
		return err
	}
	log.Info().Str("version", version()).Str("commit", commit()).Msg("tollgate starting")
	if gc.Err != nil {
		log.Warn().Err(gc.Err).Msg("could not read the container's memory limit; running without a soft memory limit (set GOMEMLIMIT to give one)")
	}
	log.Info().Int("gogc", gc.Percent).Int64("memory_limit", gc.MemoryLimit).Str("memory_limit_from", gc.LimitFrom).Msg("collector: " + gc.String())
	for _, line := range cfg.Summary() {
		log.Info().Str("config", cfg.Source).Msg(line)
	}
	return serve(cfg, f, log)
}

// loadConfig reads --config, or builds the embedded default plus discovery.
func loadConfig(f flags) (*config.Config, error) {
	var cfg *config.Config
	if f.config != "" {
		var err error
		if cfg, err = config.Load(f.config); err != nil {
			return nil, err
		}
	} else {
		cfg = config.Default(os.LookupEnv, exec.LookPath, config.ProbeTCP)
	}
	if f.listen != "" {
		cfg.Listen = f.listen
		if err := cfg.Validate(); err != nil {
			return nil, fmt.Errorf("--listen: %w", err)
		}
	}
	return cfg, nil
}

// checkConfig validates path as tollgate --config would read it and prints its summary.
func checkConfig(path string, out io.Writer) error {
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	for _, line := range cfg.Summary() {
		fmt.Fprintln(out, line)
	}
	fmt.Fprintln(out, path+": ok")
	return nil
}

// newLogger writes human-readable lines to a terminal and JSON otherwise.
func newLogger() zerolog.Logger {
	zerolog.TimeFieldFormat = time.RFC3339Nano
	if term.IsTerminal(int(os.Stderr.Fd())) {
		return zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: "15:04:05.000"}).With().Timestamp().Logger()
	}
	return zerolog.New(os.Stderr).With().Timestamp().Logger()
}
