package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The open-loop driver: calls go out at a fixed rate whatever happens to the earlier ones, as
// independent users' calls do, so a relay that slows down holds more calls at once instead
// of being sent fewer (a closed loop's coordinated omission). Every call's latency runs from
// when it was due, not from when the driver got round to sending it.

// callTimeout bounds one call beyond its hold; a call past it is an error.
const callTimeout = 30 * time.Second

// sideRound is one target's outcome of one round.
type sideRound struct {
	samples      []sample // of the calls that succeeded, from when each was due
	sent, errs   int
	errMsgs      []string
	elapsed      time.Duration // from the first call's due time to the last answer's end
	peakInFlight int64
	peakRSS      int64         // the highest VmRSS sampled during the round
	cpu          time.Duration // the target process's user+system time over the round
	steadyConns  int64         // backend connections accepted while the load was steady
	steadyWindow time.Duration
	mid          runtimeStats // Tollgate's runtime in the middle of the steady load; zero for the proxy
}

// openRound sends rate calls per second to t for dur, each held g.hold by the backend, and
// waits for every answer. pid is the target process, sampled for RSS and CPU; backend is the
// fake backend's stats, read when the load becomes steady (one hold after the first call) and
// when the last call goes out.
//
// probe, when not nil, is called once in the middle of the steady load (Tollgate's: it reads
// its /metrics); the driver's count of calls in flight goes with what it returns.
func openRound(ctx context.Context, t *target, pid int, g group, dur time.Duration, chunks int, backend *statsClient, probe func() runtimeStats) sideRound {
	n := max(1, int(float64(g.rate)*dur.Seconds()))
	out := sideRound{}
	cpu0, _ := cpuTime(pid)
	stopSampling := sampleRSS(pid, &out.peakRSS)
	l := newOpenLoad(t, g, chunks, n)
	steady := backend.window(l.start.Add(g.hold), l.start.Add(dur))
	mid := l.probeMid(dur, probe)
	out.sent = l.pace(ctx, n)
	l.wg.Wait()
	out.steadyConns, out.steadyWindow = steady()
	out.mid = <-mid
	stopSampling()
	cpu1, _ := cpuTime(pid)
	out.cpu, out.elapsed, out.peakInFlight = cpu1-cpu0, l.lastEnd, l.peak.Load()
	for i := range out.sent {
		if err := l.failed[i]; err != nil {
			out.errs++
			if len(out.errMsgs) < maxErrMsgs {
				out.errMsgs = append(out.errMsgs, err.Error())
			}
			continue
		}
		out.samples = append(out.samples, l.results[i])
	}
	return out
}

// openLoad is one round's calls: how many are in flight, the most at once, when the last
// answer ended, and each call's outcome by its number.
type openLoad struct {
	t      *target
	g      group
	chunks int
	start  time.Time // the first call's due time

	inFlight, peak atomic.Int64
	wg             sync.WaitGroup
	pool           sync.Pool // of *worker
	mu             sync.Mutex
	lastEnd        time.Duration // since start; guarded by mu
	results        []sample
	failed         []error
}

func newOpenLoad(t *target, g group, chunks, n int) *openLoad {
	return &openLoad{t: t, g: g, chunks: chunks, start: time.Now().Add(5 * time.Millisecond),
		pool:    sync.Pool{New: func() any { return newWorker() }},
		results: make([]sample, n), failed: make([]error, n)}
}

// probeMid calls probe once in the middle of the steady load and sends what it returns, with
// the driver's count of calls in flight then; with no probe it sends the zero value at once.
func (l *openLoad) probeMid(dur time.Duration, probe func() runtimeStats) <-chan runtimeStats {
	mid := make(chan runtimeStats, 1)
	if probe == nil {
		mid <- runtimeStats{}
		return mid
	}
	at := l.start.Add(l.g.hold + (dur-l.g.hold)/2)
	go func() { // exits after one reading, at most a scrape timeout after at
		time.Sleep(time.Until(at)) // the driver's clock
		n := l.inFlight.Load()
		st := probe()
		st.inFlight = n
		mid <- st
	}()
	return mid
}

// pace starts call i at its due time, g.rate calls a second from start, until n are sent or
// ctx ends; it returns how many it sent.
func (l *openLoad) pace(ctx context.Context, n int) int {
	for i := range n {
		due := l.start.Add(time.Duration(int64(i) * int64(time.Second) / int64(l.g.rate)))
		if d := time.Until(due); d > 0 {
			time.Sleep(d) // pacing the arrivals: the driver's clock, not a synchronisation
		}
		if ctx.Err() != nil {
			return i
		}
		l.wg.Add(1)
		go l.call(ctx, i, due) // exits when its call is answered, fails or times out
	}
	return n
}

// call makes call i, due at due, and records its outcome.
func (l *openLoad) call(ctx context.Context, i int, due time.Time) {
	defer l.wg.Done()
	now := l.inFlight.Add(1)
	for p := l.peak.Load(); now > p && !l.peak.CompareAndSwap(p, now); p = l.peak.Load() {
	}
	wk := l.pool.Get().(*worker)
	cctx, cancel := context.WithTimeout(ctx, l.g.hold+callTimeout)
	s, err := wk.do(cctx, l.t, l.g.stream, l.chunks, due)
	cancel()
	l.pool.Put(wk)
	l.inFlight.Add(-1)
	l.results[i], l.failed[i] = s, err
	l.mu.Lock()
	l.lastEnd = max(l.lastEnd, time.Since(l.start))
	l.mu.Unlock()
}

// sampleRSS records into peak the highest VmRSS of pid, read every 50 ms until the returned
// stop is called (which waits for the sampler to end).
func sampleRSS(pid int, peak *int64) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() { // exits when stop closes quit
		defer close(done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			if rss, err := currentRSS(pid); err == nil && rss > *peak {
				*peak = rss
			}
			select {
			case <-quit:
				return
			case <-tick.C:
			}
		}
	}()
	return func() { close(quit); <-done }
}

// currentRSS returns the process's resident set size now (VmRSS) in bytes.
func currentRSS(pid int) (int64, error) { return procStatusKB(pid, "VmRSS:") }

// statsClient reads the fake backend's counters over one keep-alive connection, so that
// reading them adds no connection of its own to the count.
type statsClient struct {
	url    string
	client *http.Client
}

func newStatsClient(base string) *statsClient {
	return &statsClient{url: base + "/_fakellm/stats", client: &http.Client{Transport: benchTransport(1), Timeout: 5 * time.Second}}
}

// connections is the backend's count of accepted connections; -1 when it cannot be read.
func (c *statsClient) connections() int64 {
	resp, err := c.client.Get(c.url)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var st struct {
		Connections int64 `json:"connections"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return -1
	}
	return st.Connections
}

// window reads the connection count at from and at to, in a goroutine of its own; the
// returned func waits for both readings and returns the connections accepted in between and
// how long that was (0 when the window was empty or a reading failed).
func (c *statsClient) window(from, to time.Time) func() (int64, time.Duration) {
	type reading struct {
		n   int64
		dur time.Duration
	}
	res := make(chan reading, 1)
	go func() { // exits after its second reading, at most a stats timeout after to
		if !to.After(from) {
			res <- reading{}
			return
		}
		time.Sleep(time.Until(from)) // waiting for the window's start: the driver's clock
		n0, t0 := c.connections(), time.Now()
		time.Sleep(time.Until(to))
		n1, t1 := c.connections(), time.Now()
		if n0 < 0 || n1 < 0 {
			res <- reading{}
			return
		}
		res <- reading{n1 - n0, t1.Sub(t0)}
	}()
	return func() (int64, time.Duration) { r := <-res; return r.n, r.dur }
}

// timeWaitSockets counts the machine's TCP sockets in TIME_WAIT (state 06 in /proc/net/tcp
// and tcp6): a benchmark that churns connections leaves them behind, and enough of them
// exhaust the ephemeral ports that every later connection needs.
func timeWaitSockets() int {
	n := 0
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			if fs := strings.Fields(line); len(fs) > 3 && fs[3] == "06" {
				n++
			}
		}
	}
	return n
}

// procStatusKB reads one "Name:   N kB" line of /proc/PID/status, in bytes.
func procStatusKB(pid int, name string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", name, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		v, ok := strings.CutPrefix(line, name)
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("read %s: %q: %w", name, line, err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("read %s: not in /proc/%d/status", name, pid)
}

// runtimeStats are the Go runtime's figures from Tollgate's /metrics.
type runtimeStats struct {
	goroutines, heapAlloc, stackInuse float64
	inFlight                          int64 // the driver's calls in flight when they were read
	ok                                bool
}

// scrapeRuntime reads go_goroutines, go_memstats_heap_alloc_bytes and
// go_memstats_stack_inuse_bytes from a Prometheus text page.
func scrapeRuntime(url string) runtimeStats {
	c := &http.Client{Timeout: 5 * time.Second}
	defer c.CloseIdleConnections()
	resp, err := c.Get(url)
	if err != nil {
		return runtimeStats{}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return runtimeStats{}
	}
	st := runtimeStats{ok: true}
	for _, line := range strings.Split(string(b), "\n") {
		name, val, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			continue
		}
		switch name {
		case "go_goroutines":
			st.goroutines = v
		case "go_memstats_heap_alloc_bytes":
			st.heapAlloc = v
		case "go_memstats_stack_inuse_bytes":
			st.stackInuse = v
		}
	}
	return st
}
