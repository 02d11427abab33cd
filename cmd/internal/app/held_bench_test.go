package app

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/internal/fakellm"
)

// BenchmarkHeldCalls measures what one call in flight holds in the gateway's process while
// its backend holds it: heap in use and goroutine stacks, after a collection, per
// held call, for the gateway and for a bare reverse proxy in its place. Both share the
// client and the fake backend in this process, so what one holds beyond the other is its
// own. Run with -benchtime 1x (the count of held calls is fixed). While the calls are held,
// TOLLGATE_HELD_PROFILE=DIR writes a heap profile per case into DIR (with -memprofilerate 1
// for every allocation) and TOLLGATE_HELD_STACKS=FILE every goroutine's stack into FILE.
func BenchmarkHeldCalls(b *testing.B) {
	const held = 400
	for _, c := range []struct {
		name   string
		stream bool
		serve  func(*testing.B, string) string
	}{
		{"non-stream", false, gatewayTo}, {"stream", true, gatewayTo},
		{"proxy/non-stream", false, proxyTo}, {"proxy/stream", true, proxyTo},
	} {
		b.Run(c.name, func(b *testing.B) {
			fake := fakellm.New(fakellm.Options{Chunks: 20, Hold: time.Hour})
			fs := httptest.NewServer(fake)
			b.Cleanup(fs.Close)
			base := c.serve(b, fs.URL)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: held}}
			defer client.CloseIdleConnections()
			body := fmt.Sprintf(`{"model":"bench/m","stream":%t,"messages":[{"role":"user","content":"hello there"}]}`, c.stream)
			// One call first, so that what every later call reuses (pools, tables) is there.
			before := func() runtime.MemStats { return memNow() }
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			// The calls end before the servers close (b.Cleanup), also when the case fails:
			// a server's Close waits for the calls it still holds, for an hour.
			defer wg.Wait()
			defer cancel()
			ended := make(chan error, 1) // the first call that ended while it should be held
			call := func() {
				defer wg.Done()
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", bytes.NewBufferString(body))
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
					if err == nil {
						err = fmt.Errorf("status %d, the answer ended", resp.StatusCode)
					}
				}
				if ctx.Err() == nil {
					select {
					case ended <- err:
					default:
					}
				}
			}
			wg.Add(1)
			go call() // exits when ctx is cancelled below
			waitHeld(b, fake, 1, ended)
			m0, g0 := before(), runtime.NumGoroutine()
			for range b.N * held {
				wg.Add(1)
				go call() // exits when ctx is cancelled below
			}
			waitHeld(b, fake, int64(b.N*held+1), ended)
			m1, g1 := memNow(), runtime.NumGoroutine()
			if path := os.Getenv("TOLLGATE_HELD_STACKS"); path != "" {
				writeProfile(b, "goroutine", path, 2)
			}
			if dir := os.Getenv("TOLLGATE_HELD_PROFILE"); dir != "" { // what holds the memory, by allocation site
				writeProfile(b, "heap", filepath.Join(dir, strings.ReplaceAll(c.name, "/", "-")+".heap.pprof"), 0)
			}
			n := float64(b.N * held)
			b.ReportMetric(float64(m1.HeapInuse-m0.HeapInuse)/n, "heap-B/call")
			b.ReportMetric(float64(m1.StackInuse-m0.StackInuse)/n, "stack-B/call")
			b.ReportMetric(float64(m1.HeapObjects-m0.HeapObjects)/n, "objects/call")
			b.ReportMetric(float64(g1-g0)/n, "goroutines/call")
		})
	}
}

// writeProfile writes the runtime profile name into path.
func writeProfile(b *testing.B, name, path string, debug int) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup(name).WriteTo(f, debug); err != nil {
		b.Fatal(err)
	}
}

// memNow is the memory statistics after a full collection.
func memNow() runtime.MemStats {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}

// waitHeld waits until the fake backend holds n calls; a call that ended fails at once.
func waitHeld(b *testing.B, fake *fakellm.Server, n int64, ended <-chan error) {
	deadline := time.Now().Add(30 * time.Second)
	for fake.Stats().Concurrent < n {
		select {
		case err := <-ended:
			b.Fatalf("a call ended while the backend should hold it: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			b.Fatalf("the backend holds %d calls, want %d", fake.Stats().Concurrent, n)
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
}
