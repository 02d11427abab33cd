// Command fakellm serves a fake LLM backend speaking the OpenAI (Chat Completions, Responses),
// Anthropic and Gemini wire formats, with scripted quirks (package cmd/internal/fakellm; its
// Script type is the --script file's format).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/tollgate/tollgate/cmd/internal/fakellm"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fakellm:", err)
		os.Exit(1)
	}
}

// run serves until ctx is done (a signal, in main), printing the "listening on ADDR" line on out.
func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("fakellm", flag.ContinueOnError)
	var (
		listen = fs.String("listen", "127.0.0.1:0", "address to listen on; port 0 picks a free port")
		opts   fakellm.Options
		mode   = fs.String("mode", "", "quirk modes for every request, comma-separated: "+strings.Join(fakellm.ModeNames(), ", "))
		logReq = fs.Bool("log", false, "log every request (method, path, mode header) on stderr")
		models = fs.String("models", "", "comma-separated model ids to list (default "+strings.Join(fakellm.DefaultModels, ",")+")")
	)
	fs.DurationVar(&opts.Latency, "latency", 0, "delay before the response headers")
	fs.DurationVar(&opts.ChunkInterval, "chunk-interval", 0, "delay between streamed chunks")
	fs.DurationVar(&opts.Hold, "hold", 0, "how long every answer takes after --latency: a whole one is sent at its end, a stream's chunks are spread over it (replaces --chunk-interval)")
	fs.Float64Var(&opts.TokensPerSecond, "tps", 0, "chunks per second, when --chunk-interval is 0 (0 = no pacing)")
	fs.IntVar(&opts.Chunks, "chunks", fakellm.DefaultChunks, "content chunks per answer")
	fs.StringVar(&opts.Reply, "reply", "", "answer text (default: a built-in sentence)")
	fs.IntVar(&opts.MaxConcurrent, "max-concurrent", 0, "a hidden concurrency limit: refuse requests beyond this many in flight (0 = no limit; POST /_fakellm/limit changes it)")
	fs.StringVar(&opts.BusyStyle, "busy-style", "", "how a request beyond --max-concurrent is refused: "+strings.Join(fakellm.BusyStyles(), ", ")+" (default stated)")
	script := fs.String("script", "", "JSON file of per-key and per-model behaviour (fakellm.Script; POST /_fakellm/script replaces it)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	m, err := fakellm.ParseModes(*mode)
	if err != nil {
		return err
	}
	opts.Modes = m
	if err := loadScript(*script, &opts.Script); err != nil {
		return err
	}
	if err := fakellm.CheckBusyStyle(opts.BusyStyle); err != nil {
		return err
	}
	if *models != "" {
		opts.Models = strings.Split(*models, ",")
	}

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	fake := fakellm.New(opts)
	var h http.Handler = fake
	if *logReq {
		h = logRequests(h)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ConnState: fake.ConnState}
	fmt.Fprintf(out, "listening on %s\n", ln.Addr())
	return serveUntil(ctx, srv, ln)
}

// serveUntil serves srv on ln until ctx ends, then shuts it down: streams in progress get a
// moment to finish, and hanging ones (mode hang) are cut.
func serveUntil(ctx context.Context, srv *http.Server, ln net.Listener) error {
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }() // exits when the server is shut down or closed
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		srv.Close()
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// loadScript reads a Script from path ("" leaves it empty) and checks it.
func loadScript(path string, sc *fakellm.Script) error {
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("script: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(sc); err != nil {
		return fmt.Errorf("script %s: %w", path, err)
	}
	if err := sc.Check(); err != nil {
		return fmt.Errorf("script %s: %w", path, err)
	}
	return nil
}

// logRequests logs each request as it arrives; off by default so benchmarks pay nothing.
func logRequests(next http.Handler) http.Handler {
	logger := log.New(os.Stderr, "fakellm: ", log.LstdFlags|log.Lmicroseconds)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		logger.Printf("%s %s mode=%q", r.Method, r.URL.RequestURI(), r.Header.Get("X-Fakellm-Mode"))
		next.ServeHTTP(w, r)
	})
}
