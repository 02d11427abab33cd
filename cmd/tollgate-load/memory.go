package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// memorySetup: one held lane and room to queue n calls.
func memorySetup(n int) setup {
	return setup{name: "queue-" + strconv.Itoa(n), maxRunning: 1, maxAdmitted: n + 1, providers: []provider{
		{name: "gpu", lanes: 1, queueLength: n, queueTimeout: 10 * time.Minute, backend: answer,
			models: []model{{"qwen", 1}}},
	}}
}

// queueMemory measures what a queued request costs the gateway, two ways, each on a fresh
// gateway whose one lane is held:
//
//   - http: n real HTTP clients in a child process (so their side is not in this heap, and
//     the file descriptors split between two processes), queued through the real listener;
//     the heap then holds the server connections, the decoded requests and the admission state.
//   - admission: n callers of Gateway.Start in this process, no HTTP; the heap holds only the
//     admission state and the request values.
func queueMemory(ctx context.Context, o runOpts) []*result {
	n := o.queued
	var rs []*result
	rs = append(rs, runLocal(ctx, "queue-memory/http", memorySetup(n), 16, func(e *env, r *result) {
		measureQueue(ctx, e, r, n, func() (func(), error) { return queueOverHTTP(e.base, n) })
	}))
	rs = append(rs, runLocal(ctx, "queue-memory/admission", memorySetup(n), 16, func(e *env, r *result) {
		measureQueue(ctx, e, r, n, func() (func(), error) { return queueInProcess(ctx, e, n) })
	}))
	return rs
}

// measureQueue holds the lane, reads the heap, queues n calls with enqueue, reads it again,
// and then lets everything go.
func measureQueue(ctx context.Context, e *env, r *result, n int, enqueue func() (func(), error)) {
	blocker := make(chan outcome, 1)
	go func() { blocker <- send(ctx, e.client, e.base, call{model: "gpu/qwen", tag: "blocker", hold: true}) }() // exits when released
	if _, err := e.waitState(ctx, 2*time.Second, func(st stateDoc) bool { return st.Running == 1 }); err != nil {
		r.breach("the blocker never started: %v", err)
	}
	before := heap()
	stop, err := enqueue()
	if err != nil {
		r.breach("enqueue: %v", err)
		e.local.backends[0].tap.release()
		<-blocker
		return
	}
	if _, err := e.waitState(ctx, 60*time.Second, func(st stateDoc) bool { return st.Queued == n }); err != nil {
		r.breach("%d calls were not all queued: %v", n, err)
	}
	with := heap()
	stop()
	e.local.backends[0].tap.release()
	r.add([]outcome{<-blocker})
	per := func(a, b uint64) float64 { return (float64(a) - float64(b)) / float64(n) }
	r.Figures["queued"] = float64(n)
	r.Figures["heap_bytes_per_queued"] = per(with.HeapAlloc, before.HeapAlloc)
	r.Figures["stack_bytes_per_queued"] = per(with.StackInuse, before.StackInuse)
	r.Figures["goroutines_per_queued"] = (float64(with.goroutines) - float64(before.goroutines)) / float64(n)
	r.Figures["heap_mib_with_queue"] = float64(with.HeapAlloc) / (1 << 20)
	h := r.Figures["heap_bytes_per_queued"]
	r.target("heap KiB per queued request", h/1024, "≤ 32", h <= 32<<10)
}

type memSnap struct {
	runtime.MemStats
	goroutines int
}

// heap reads the memory statistics after a full collection, so only live memory counts.
func heap() memSnap {
	runtime.GC()
	runtime.GC()
	var m memSnap
	runtime.ReadMemStats(&m.MemStats)
	m.goroutines = runtime.NumGoroutine()
	return m
}

// queueInProcess starts n callers of Gateway.Start; stop hangs them all up and waits for them.
func queueInProcess(ctx context.Context, e *env, n int) (func(), error) {
	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	g := e.local.app.Gateway
	for i := range n {
		wg.Add(1)
		go func() { // exits when Start returns: the call is cancelled by stop
			defer wg.Done()
			req := &llm.Request{Model: "gpu/qwen", Messages: []llm.Message{{Role: "user",
				Content: llm.Content{Text: "tag:q" + strconv.Itoa(i) + " say something short"}}}}
			if sv, err := g.Start(cctx, "gpu/qwen", llm.Interactive, req); err == nil {
				_ = sv.Stream.Close()
			}
		}()
	}
	return func() { cancel(); wg.Wait() }, nil
}

// childFlag makes the binary a client process for queueOverHTTP.
const childFlag = "-queue-clients-child"

// queueOverHTTP re-runs this binary as a child that opens n connections to base and sends a
// call on each; stop closes the child's stdin, which makes it exit and drop every connection.
func queueOverHTTP(base string, n int) (func(), error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable: %w", err)
	}
	cmd := exec.Command(exe, childFlag, strconv.Itoa(n), base)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("child stdin: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start child: %w", err)
	}
	return func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	}, nil
}

// runQueueClients is the child's main: n concurrent calls to base, held until stdin closes.
func runQueueClients(args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("usage: %s N URL", childFlag)
	}
	n, err := strconv.Atoi(args[0])
	if err != nil {
		return fmt.Errorf("N: %w", err)
	}
	raiseFileLimit()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: -1, DisableCompression: true}}
	ctx, cancel := context.WithCancel(context.Background())
	for i := range n {
		go func() { // exits when the process does, or when its call is answered
			o := send(ctx, hc, args[1], call{model: "gpu/qwen", tag: "q" + strconv.Itoa(i)})
			if !o.cancelled && o.breach != "" {
				fmt.Fprintln(os.Stderr, "queue client:", o.breach)
			}
		}()
	}
	_, _ = io.Copy(io.Discard, bufio.NewReader(os.Stdin)) // until the parent closes stdin
	cancel()
	return nil
}

// raiseFileLimit lifts the soft open-file limit to the hard one: 10,000 connections need
// as many descriptors.
func raiseFileLimit() {
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil && lim.Cur < lim.Max {
		lim.Cur = lim.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
}
