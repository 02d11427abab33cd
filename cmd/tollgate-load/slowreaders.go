package main

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/tollgate/tollgate/cmd/internal/fakellm"
)

// slow-readers: max_running clients that send a streaming request and
// never read a byte, beside normal traffic. Most ask for an answer of a usual size (tens of
// KB, which the sockets buffer: the backend ends and the call with it); two ask for one far
// larger than the socket buffers, so the gateway's writes to them block. Invariants:
//   - the normal traffic is served as if the non-readers were not there — as if they were
//     clients that read: every call succeeds, and its p99 total time over slowRounds runs
//     stays within 1.5× (+50 ms) of the same traffic's over runs alternating with them,
//     beside the same requests from clients that read their answers;
//   - the large answers' lanes come back within their provider's run_timeout + 1 s, while
//     their clients are still connected and read nothing;
//   - the heap stays bounded (the gateway buffers no answer for a client that does not read);
//   - afterwards the usual: idle, backends within their lanes, goroutines at baseline.

const (
	slowReaderRunTimeout = 2 * time.Second
	slowNormalCalls      = 60
	slowNormalSpread     = 2 * time.Second
	slowRounds           = 3 // pairs of runs, baseline and beside the non-readers
)

// usualAnswer is an answer of a usual size: about 40 KB over 40 chunks.
var usualAnswer = fakellm.Options{Latency: 5 * time.Millisecond, Chunks: 40, ChunkInterval: time.Millisecond,
	Reply: strings.Repeat("lorem ipsum dolor sit amet consectetur ", 1000)}

// hugeAnswer is larger than the socket buffers of a client that does not read (which keeps
// its receive buffer small): 8 MB, built when the scenario runs.
func hugeAnswer() fakellm.Options {
	return fakellm.Options{Chunks: 1024, Reply: strings.Repeat(strings.Repeat("x", 8191)+" ", 1024)}
}

func slowReadersSetup() setup {
	return setup{name: "slow-readers", maxRunning: 10, maxAdmitted: 64, providers: []provider{
		{name: "chat", lanes: 6, queueLength: 60, queueTimeout: time.Minute, backend: answer, models: []model{{"c1", 6}}},
		{name: "bulk", lanes: 8, queueLength: 8, queueTimeout: time.Minute, backend: usualAnswer, models: []model{{"b1", 8}}},
		{name: "huge", lanes: 2, queueLength: 2, queueTimeout: time.Minute, runTimeout: slowReaderRunTimeout,
			backend: hugeAnswer(), models: []model{{"h1", 2}}},
	}}
}

func slowReaders(ctx context.Context, o runOpts) []*result {
	return []*result{runLocal(ctx, "slow-readers", slowReadersSetup(), slowNormalCalls, func(e *env, r *result) {
		slowReadersLoad(ctx, e, r)
	})}
}

// slowReadersLoad sends the normal traffic in slowRounds pairs of runs: beside clients that
// read their answers (the baseline), then beside the same requests from connections that
// never read. The pairs alternate so that what else loads the machine weighs on both sides
// alike: two single runs a few seconds apart differ by more than the non-readers do when
// other processes start or stop between them.
func slowReadersLoad(ctx context.Context, e *env, r *result) {
	var alone, beside []outcome
	var back time.Duration
	grew := 0.0
	for range slowRounds {
		alone = append(alone, besideReaders(ctx, e)...)
		b, bk, g, err := besideNonReaders(ctx, e)
		if err != nil {
			r.breach("non-readers: %v", err)
			return
		}
		beside = append(beside, b...)
		if bk < 0 || back >= 0 && bk > back {
			back = bk // the worst round: -1 (never back) beats any wait
		}
		grew = max(grew, g)
	}
	r.add(beside)
	judgeSlowReaders(r, alone, beside, back, grew)
}

// besideReaders is one run of the normal traffic beside the non-readers' requests from
// clients that read.
func besideReaders(ctx context.Context, e *env) []outcome {
	readers := make(chan []outcome, 1)
	go func() { // exits when the reading clients have their answers
		readers <- fire(ctx, e, readingCalls(), nil)
	}()
	alone := normalTraffic(ctx, e)
	<-readers
	return alone
}

// besideNonReaders is one run of the normal traffic beside connections that never read. It
// returns the normal calls' outcomes, when the huge calls' lanes came back after the last
// request went out (-1: not within the scenario's bound) and how much the heap grew (MiB).
func besideNonReaders(ctx context.Context, e *env) ([]outcome, time.Duration, float64, error) {
	heap0 := heapInUse()
	conns, sent, err := openNonReaders(e, 8, "bulk/b1", 2, "huge/h1")
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	if err != nil {
		return nil, 0, 0, err
	}
	lanesBack := make(chan time.Duration, 1)
	go func() { // exits when the huge calls no longer run, or at the deadline
		lanesBack <- waitProviderIdle(ctx, e, "huge", sent, slowReaderRunTimeout+5*time.Second)
	}()
	beside := normalTraffic(ctx, e)
	back := <-lanesBack
	heap1 := heapInUse()
	return beside, back, float64(int64(heap1)-int64(heap0)) / (1 << 20), nil
}

// normalTraffic sends the chat calls, spread over slowNormalSpread, half of them streaming.
func normalTraffic(ctx context.Context, e *env) []outcome {
	calls := make([]call, slowNormalCalls)
	for i := range calls {
		calls[i] = call{model: "chat/c1", stream: i%2 == 0, tag: fmt.Sprintf("n%d", i)}
	}
	return fire(ctx, e, calls, func(i int) (time.Duration, time.Duration) {
		return time.Duration(i) * slowNormalSpread / slowNormalCalls, 0
	})
}

// readingCalls are the non-readers' requests, from clients that read: 8 bulk, 2 huge.
func readingCalls() []call {
	var calls []call
	for i := range 10 {
		m := "bulk/b1"
		if i >= 8 {
			m = "huge/h1"
		}
		calls = append(calls, call{model: m, stream: true, tag: fmt.Sprintf("rd%d", i)})
	}
	return calls
}

// judgeSlowReaders holds the normal calls beside the non-readers to those beside readers,
// and the non-readers' lanes and the heap's growth (MiB) to what stopping them allows.
func judgeSlowReaders(r *result, alone, beside []outcome, back time.Duration, grew float64) {
	if n := count(beside, ok); n != len(beside) {
		r.breach("%d of %d normal calls succeeded beside the non-readers", n, len(beside))
	}
	if n := count(alone, ok); n != len(alone) {
		r.breach("%d of %d normal calls succeeded beside reading clients", n, len(alone))
	}
	p99a, p99b := p99Total(alone), p99Total(beside)
	r.Figures["normal_p99_ms_beside_readers"] = p99a
	r.Figures["normal_p99_ms_beside_non_readers"] = p99b
	if p99b > 1.5*p99a+50 {
		r.breach("normal traffic p99 %.0f ms beside the non-readers, %.0f ms beside readers: not as if they were not there", p99b, p99a)
	}
	r.Figures["huge_lanes_back_ms"] = ms(back)
	if back < 0 || back > slowReaderRunTimeout+time.Second {
		r.breach("the non-readers' lanes came back after %v: want within run_timeout (%v) + 1s", back, slowReaderRunTimeout)
	}
	r.Figures["heap_growth_mib"] = grew
	if grew > 64 {
		r.breach("the heap grew %.0f MiB with non-readers connected: answers are being held for them", grew)
	}
}

// openNonReaders sends one streaming request per connection and never reads: nBulk for
// bulk, nHuge for huge. It returns the connections and when the last request went out.
func openNonReaders(e *env, nBulk int, bulk string, nHuge int, huge string) ([]net.Conn, time.Time, error) {
	addr := strings.TrimPrefix(e.base, "http://")
	var conns []net.Conn
	var mu sync.Mutex
	send := func(model string, i int) error {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return err
		}
		// A small receive window: the gateway's writes block after a few MB, as they do for
		// any client that stops reading, without this harness pushing tens of MB through.
		_ = c.(*net.TCPConn).SetReadBuffer(4 << 10)
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
		body := fmt.Sprintf(`{"model":%q,"stream":true,"messages":[{"role":"user","content":"tag:nr%d go on"}]}`, model, i)
		_, err = fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		return err
	}
	for i := range nBulk {
		if err := send(bulk, i); err != nil {
			return conns, time.Now(), err
		}
	}
	for i := range nHuge {
		if err := send(huge, nBulk+i); err != nil {
			return conns, time.Now(), err
		}
	}
	return conns, time.Now(), nil
}

// waitProviderIdle returns how long after since provider p first had calls running and then
// none, or -1 when that did not happen within limit.
func waitProviderIdle(ctx context.Context, e *env, p string, since time.Time, limit time.Duration) time.Duration {
	seenRunning := false
	deadline := since.Add(limit)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		st, err := e.state(ctx)
		if err == nil {
			for _, pv := range st.Providers {
				if pv.Name != p {
					continue
				}
				if pv.Running > 0 {
					seenRunning = true
				} else if seenRunning {
					return time.Since(since)
				}
			}
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
	return -1
}

func p99Total(outs []outcome) float64 {
	var xs []float64
	for _, o := range outs {
		xs = append(xs, ms(o.total))
	}
	return summarize(xs).P99
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}
