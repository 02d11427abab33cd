package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// `tollgate-bench burst` measures the memory a burst of large requests costs Tollgate and
// what it leaves behind: calls concurrent requests of size bytes each (a coding agent's
// context of whole files), sent at once through one ingress format, against the fake backend
// of kind openai: Messages is translated to chat and encoded for it, Responses goes to its own
// /v1/responses as sent. Each format gets a fresh Tollgate process: the report gives its peak
// RSS (VmHWM) over the burst, then its RSS and Go heap (go_memstats_heap_alloc_bytes) at
// points of the idle time after it.

// burstOptions are the flags of `tollgate-bench burst`.
type burstOptions struct {
	tollgate, fakellm string
	formats           []string
	calls             int
	size              int
	idle              time.Duration
	logDir, out       string
	args              []string
}

// burstFormats are the routes a burst can go through.
var burstFormats = map[string]string{"chat": "/v1/chat/completions", "messages": "/v1/messages", "responses": "/v1/responses"}

func parseBurst(args []string) (burstOptions, error) {
	o := burstOptions{args: args}
	fs := flag.NewFlagSet("tollgate-bench burst", flag.ContinueOnError)
	fs.StringVar(&o.tollgate, "tollgate", "bin/tollgate", "Tollgate `binary`")
	fs.StringVar(&o.fakellm, "fakellm", "bin/fakellm", "fake backend `binary`")
	formats := fs.String("formats", "chat,messages,responses", "ingress `formats`, each with a fresh Tollgate")
	fs.IntVar(&o.calls, "calls", 40, "concurrent requests in the burst")
	mb := fs.Float64("mb", 7.7, "each request body's size in `MB` (10^6 bytes)")
	fs.DurationVar(&o.idle, "idle", 30*time.Second, "how long to watch the idle gateway after the burst")
	fs.StringVar(&o.logDir, "logs", "", "keep the children's logs in `dir` (default: a temporary directory, removed after a clean run)")
	fs.StringVar(&o.out, "out", "", "also write the markdown report to `file`")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	for f := range strings.SplitSeq(*formats, ",") {
		if burstFormats[f] == "" {
			return o, fmt.Errorf("--formats: %q is not chat, messages or responses", f)
		}
		o.formats = append(o.formats, f)
	}
	o.size = int(*mb * 1e6)
	if o.calls < 1 || o.size < 1024 || o.idle < time.Second {
		return o, errors.New("need --calls ≥ 1, --mb ≥ 0.001 and --idle ≥ 1s")
	}
	return o, nil
}

// runBurst is `tollgate-bench burst`.
func runBurst(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	o, err := parseBurst(args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	logDir, done, err := childLogs(o.logDir, "tollgate-bench-burst-", stderr)
	if err != nil {
		return err
	}
	defer func() { done(err) }()
	fake, err := startProc("fakellm", logDir, listeningLine, o.fakellm, "--listen", "127.0.0.1:0", "--chunks", "4")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, fake.stop()) }()
	cfg := filepath.Join(logDir, "tollgate.yaml")
	body := strings.Replace(tollgateConfig("http://"+fake.addr+"/v1"), "limits: {",
		fmt.Sprintf("limits: {max_body_bytes: %d, ", o.size+1<<20), 1)
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	rep := &burstReport{o: o}
	for _, f := range o.formats {
		fmt.Fprintf(stderr, "burst through %s\n", f)
		row, err := burstOnce(ctx, o, f, cfg, logDir)
		if err != nil {
			return err
		}
		rep.rows = append(rep.rows, row)
	}
	return emit(rep, o.out, false, stdout, stderr)
}

// burstRow is one format's figures.
type burstRow struct {
	format  string
	peakRSS int64
	took    time.Duration
	idle    []idleSample
}

// idleSample is the gateway's memory at a point after the burst ended.
type idleSample struct {
	after     time.Duration
	rss       int64
	heapAlloc float64
}

// idlePoints are when, after the burst, the idle gateway is sampled (those within --idle).
var idlePoints = []time.Duration{time.Second, 5 * time.Second, 15 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 3 * time.Minute, 4 * time.Minute, 5 * time.Minute}

// burstOnce runs one burst through format on a fresh Tollgate and watches it idle.
func burstOnce(ctx context.Context, o burstOptions, format, cfg, logDir string) (row burstRow, err error) {
	tg, err := startProc("tollgate-"+format, logDir, tollgateLine, o.tollgate, "--config", cfg, "--listen", "127.0.0.1:0")
	if err != nil {
		return row, err
	}
	defer func() { err = errors.Join(err, tg.stop()) }()
	row.format = format
	base := "http://" + tg.addr
	payload := burstBody(format, o.size)
	start := time.Now()
	if err := sendBurst(ctx, base+burstFormats[format], payload, o.calls); err != nil {
		return row, fmt.Errorf("%s: %w", format, err)
	}
	row.took = time.Since(start)
	end := time.Now()
	if row.peakRSS, err = peakRSS(tg.cmd.Process.Pid); err != nil {
		return row, err
	}
	for _, at := range idlePoints {
		if at > o.idle {
			break
		}
		select {
		case <-ctx.Done():
			return row, ctx.Err()
		case <-time.After(time.Until(end.Add(at))):
		}
		rss, err := currentRSS(tg.cmd.Process.Pid)
		if err != nil {
			return row, err
		}
		// Scraping allocates a little; it is the same for every format and far below the figures.
		row.idle = append(row.idle, idleSample{after: at, rss: rss, heapAlloc: scrapeRuntime(base + "/metrics").heapAlloc})
	}
	return row, nil
}

// sendBurst posts payload to url calls times at once and waits for every answer, which must be
// a 200.
func sendBurst(ctx context.Context, url string, payload []byte, calls int) error {
	client := &http.Client{Transport: benchTransport(calls), Timeout: 5 * time.Minute}
	defer client.CloseIdleConnections()
	errs := make([]error, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(payload))
			if err != nil {
				errs[i] = err
				return
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Anthropic-Version", "2023-06-01")
			resp, err := client.Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			if resp.StatusCode != http.StatusOK {
				errs[i] = fmt.Errorf("status %d: %s", resp.StatusCode, b)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// burstBody is a request of about size bytes in format: one user message of source-like
// text (lines with quotes and tabs, so the JSON has escapes to decode) in the format's own
// content parts, and a short system prompt.
func burstBody(format string, size int) []byte {
	line := `\tif err := json.Unmarshal(b, &v); err != nil { return fmt.Errorf(\"decode %q: %w\", name, err) }\n`
	text := strings.Repeat(line, size/len(line)+1)[:size-size%len(line)]
	model := benchProvider + "/" + benchModel
	switch format {
	case "messages":
		return fmt.Appendf(nil, `{"model":%q,"max_tokens":64,"system":"You are a coding agent.","messages":[{"role":"user","content":[{"type":"text","text":"%s"}]}]}`, model, text)
	case "responses":
		return fmt.Appendf(nil, `{"model":%q,"instructions":"You are a coding agent.","store":false,"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"%s"}]}]}`, model, text)
	}
	return fmt.Appendf(nil, `{"model":%q,"messages":[{"role":"system","content":"You are a coding agent."},{"role":"user","content":[{"type":"text","text":"%s"}]}]}`, model, text)
}

// burstReport is the markdown report of `tollgate-bench burst`.
type burstReport struct {
	o    burstOptions
	rows []burstRow
}

func (r *burstReport) write(w io.Writer) bool {
	fmt.Fprintf(w, "`make bench-burst ARGS='%s'`: %d concurrent requests of %.1f MB each, a fresh Tollgate per format, fake chat backend\n\n",
		strings.Join(r.o.args, " "), r.o.calls, float64(r.o.size)/1e6)
	head := "| format | burst s | peak RSS MB |"
	sep := "|---|---|---|"
	for _, s := range r.rows[0].idle {
		head += fmt.Sprintf(" +%s RSS / heap MB |", s.after)
		sep += "---|"
	}
	fmt.Fprintln(w, head)
	fmt.Fprintln(w, sep)
	for _, row := range r.rows {
		fmt.Fprintf(w, "| %s | %.1f | %.0f |", row.format, row.took.Seconds(), float64(row.peakRSS)/(1<<20))
		for _, s := range row.idle {
			fmt.Fprintf(w, " %.0f / %.0f |", float64(s.rss)/(1<<20), s.heapAlloc/(1<<20))
		}
		fmt.Fprintln(w)
	}
	return true
}

func (r *burstReport) errorReport() string { return "" }
