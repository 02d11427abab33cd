package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/internal/fakellm"
)

// keystrokes is an editor's autocompletion traffic seen from the backend: when each
// completion, named by its prompt, started there and when the backend saw it end (its
// request's context ended: the gateway closed the connection, or the answer was over).
type keystrokes struct {
	mu       sync.Mutex
	started  map[string]time.Time
	stopped  map[string]time.Time
	hungUpAt map[string]time.Time // when the client superseded it
}

func (k *keystrokes) serve(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/completions" {
			next.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var p struct {
			Prompt string `json:"prompt"`
		}
		_ = json.Unmarshal(body, &p)
		k.mu.Lock()
		k.started[p.Prompt] = time.Now()
		k.mu.Unlock()
		end := func() {
			k.mu.Lock()
			if _, ok := k.stopped[p.Prompt]; !ok {
				k.stopped[p.Prompt] = time.Now()
			}
			k.mu.Unlock()
		}
		stop := context.AfterFunc(r.Context(), end)
		defer stop()
		next.ServeHTTP(w, r)
		end()
	})
}

// BenchmarkAutocomplete is an editor typing against one local model with one lane: a
// streamed fill-in-the-middle completion every 50 ms (20 a second), each superseded, its
// request hung up, 150 ms after it was sent. Each completion would stream for 2 s if let
// run, so every one is superseded. It reports, over the b.N completions:
//   - backend-max-running: the most completions the backend held at once, each from its
//     request's arrival to the moment the backend's HTTP server saw it end;
//   - overlap-ms-max: the longest time two completions were both held there (0 when
//     backend-max-running is 1): how late the backend saw a hang-up the gateway had already
//     passed on by closing the connection before it gave the lane to the next call;
//   - stop-ms-p50/p99/max: from a hang-up to the backend call's end;
//   - handoff-ms-p50/p99/max: from the hang-up of a running completion to the start, at the
//     backend, of the next one that was waiting for its lane.
func BenchmarkAutocomplete(b *testing.B) {
	fake := fakellm.New(fakellm.Options{Reply: strings.Repeat("x ", 100), Chunks: 100, ChunkInterval: 20 * time.Millisecond})
	k := &keystrokes{started: map[string]time.Time{}, stopped: map[string]time.Time{}, hungUpAt: map[string]time.Time{}}
	srv := httptest.NewServer(k.serve(fake))
	b.Cleanup(srv.Close)
	g := startGateway(b, fmt.Sprintf(`
providers:
  - name: local
    kind: ollama
    base_url: %s/v1
    lanes: 1
    queue_length: 16
    queue_timeout: 10s
    models: [{id: coder}]
`, srv.URL), nil)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	b.Cleanup(client.CloseIdleConnections)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var wg sync.WaitGroup
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		<-tick.C
		prompt := fmt.Sprintf("keystroke %d: def f(", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithCancel(context.Background())
			body := fmt.Sprintf(`{"model":"local/coder","prompt":%q,"suffix":")\n","stream":true,"max_tokens":200}`, prompt)
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.URL+"/v1/completions", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			time.AfterFunc(150*time.Millisecond, func() {
				k.mu.Lock()
				k.hungUpAt[prompt] = time.Now()
				k.mu.Unlock()
				cancel()
			})
			if resp, err := client.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	g.waitIdle(b)
	k.report(b)
}

// report computes and reports the figures of BenchmarkAutocomplete.
func (k *keystrokes) report(b *testing.B) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var stops, handoffs []float64
	type run struct {
		prompt     string
		start, end time.Time
	}
	var runs []run
	for p, s := range k.started {
		runs = append(runs, run{p, s, k.stopped[p]})
	}
	slices.SortFunc(runs, func(a, b run) int { return a.start.Compare(b.start) })
	maxRun, overlap := 0, time.Duration(0)
	for i, r := range runs {
		n := 1
		for _, o := range runs[:i] {
			if o.end.After(r.start) {
				n++
				overlap = max(overlap, o.end.Sub(r.start))
			}
		}
		maxRun = max(maxRun, n)
	}
	for i, r := range runs {
		hung, ok := k.hungUpAt[r.prompt]
		if !ok || hung.Before(r.start) {
			continue // hung up while queued: it never ran
		}
		stops = append(stops, ms(r.end.Sub(hung)))
		if i+1 < len(runs) {
			handoffs = append(handoffs, ms(runs[i+1].start.Sub(hung)))
		}
	}
	b.ReportMetric(float64(maxRun), "backend-max-running")
	b.ReportMetric(ms(overlap), "overlap-ms-max")
	b.ReportMetric(float64(len(runs)), "backend-calls")
	for name, xs := range map[string][]float64{"stop": stops, "handoff": handoffs} {
		if len(xs) == 0 {
			continue
		}
		slices.Sort(xs)
		b.ReportMetric(xs[len(xs)/2], name+"-ms-p50")
		b.ReportMetric(xs[len(xs)*99/100], name+"-ms-p99")
		b.ReportMetric(xs[len(xs)-1], name+"-ms-max")
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
