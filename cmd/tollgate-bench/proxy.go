package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// serveProxy is `tollgate-bench proxy`: the bare httputil.ReverseProxy that Tollgate is
// measured against. It runs as its own process so it pays what Tollgate pays (a process, a
// listener, a pooled transport) and nothing more: no parsing, no admission, no logging.
func serveProxy(args []string) error {
	fs := flag.NewFlagSet("tollgate-bench proxy", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on; port 0 picks a free port")
	target := fs.String("target", "", "backend base URL, e.g. http://127.0.0.1:9000")
	idle := fs.Int("idle", 256, "idle connections kept to the backend (size it to the calls held at once)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	u, err := url.Parse(*target)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return fmt.Errorf("--target %q: want an absolute URL such as http://127.0.0.1:9000", *target)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if *idle < 1 {
		return fmt.Errorf("--idle %d: want at least 1", *idle)
	}
	srv := &http.Server{Handler: newProxy(u, *idle), ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("listening on %s\n", ln.Addr())
	return serveUntilSignal(srv, ln)
}

// newProxy returns the bare proxy: a ReverseProxy (which flushes text/event-stream answers
// event by event) behind a handler that reads the body into memory first.
func newProxy(target *url.URL, idle int) http.Handler {
	rp := &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport: benchTransport(idle),
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Forwarding the client's body object straight through produced sporadic
		// "unexpected EOF" on streams; Tollgate sends the backend a fresh in-memory body,
		// and so does its yardstick.
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		r.ContentLength = int64(len(body))
		rp.ServeHTTP(w, r)
	})
}

// benchTransport is a keep-alive transport with room for idle connections per host.
// Compression is off, as in Tollgate's backend transport, so no gzip layer holds back events.
func benchTransport(idlePerHost int) *http.Transport {
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Transport{
		DialContext:         d.DialContext,
		MaxIdleConns:        4 * idlePerHost,
		MaxIdleConnsPerHost: idlePerHost,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
}

// serveUntilSignal serves srv on ln until SIGINT or SIGTERM, then shuts it down.
// server is what serveUntilSignal runs: an *http.Server (the bare proxy) or the gateway's
// own (*serve.Server).
type server interface {
	Serve(net.Listener) error
	Shutdown(context.Context) error
	Close() error
}

func serveUntilSignal(srv server, ln net.Listener) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }() // exits when srv is shut down
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		_ = srv.Close()
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}
