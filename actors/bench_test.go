package actors

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/providers/llm"
)

// instantBackend answers at once with an empty stream: a benchmark of it measures only the
// gateway's own admission work.
type instantBackend struct{}

func (instantBackend) Open(context.Context, *llm.Request) (llm.Stream, error) {
	return instantStream{}, nil
}

type instantStream struct{}

func (instantStream) Next() (llm.Chunk, error) { return llm.Chunk{}, io.EOF }
func (instantStream) Close() error             { return nil }

// mailboxCounter counts, while on, the messages posted to the gateway's mailboxes (every
// actor's: it is a mailbox middleware, newGateway's seam), system messages included, but not
// the state queries a benchmark's own idle check sends. Off, it costs a load per message, so
// a timed run leaves it off and the messages are counted in a run of their own.
type mailboxCounter struct {
	on atomic.Bool
	n  atomic.Int64
}

func (c *mailboxCounter) MailboxStarted() {}
func (c *mailboxCounter) MessagePosted(m any) {
	if _, query := m.(*stateQuery); c.on.Load() && !query {
		c.n.Add(1)
	}
}
func (c *mailboxCounter) MessageReceived(any) {}
func (c *mailboxCounter) MailboxEmpty()       {}

// cycle is one admission cycle on model id: Start, the stream's end, Close.
func cycle(b *testing.B, g *Gateway, id string, req *llm.Request) bool {
	sv, err := g.Start(context.Background(), id, llm.Interactive, req)
	if err != nil {
		b.Errorf("start %s: %v", id, err)
		return false
	}
	if _, err := sv.Stream.Next(); err != io.EOF {
		b.Errorf("next: %v", err)
	}
	_ = sv.Stream.Close()
	return true
}

// msgsPerCall runs n more cycles over ids from clients goroutines with the counter on, and
// reports the mailbox messages per cycle. With settle, it counts once the gateway is idle
// again, so that the last cycles' releases are in; without (calls are held), those few are
// left out.
func msgsPerCall(b *testing.B, g *Gateway, ids []string, msgs *mailboxCounter, clients, n int, settle bool) {
	req := &llm.Request{Messages: []llm.Message{{Role: "user", Content: llm.Content{Text: "hi"}}}}
	msgs.on.Store(true)
	defer msgs.on.Store(false)
	n0 := msgs.n.Load()
	var left atomic.Int64
	left.Store(int64(n))
	var wg sync.WaitGroup
	for w := range clients {
		wg.Go(func() { // exits when the n cycles are made
			for i := w; left.Add(-1) >= 0 && cycle(b, g, ids[i%len(ids)], req); i++ {
			}
		})
	}
	wg.Wait()
	if settle {
		waitIdle(b, g)
	}
	b.ReportMetric(float64(msgs.n.Load()-n0)/float64(n), "msgs/call")
}

// waitIdle waits until every cycle has given its lanes back.
func waitIdle(b *testing.B, g *Gateway) {
	deadline := time.Now().Add(5 * time.Second)
	for st := g.State(); !(st.Running == 0 && st.Queued == 0); st = g.State() {
		if time.Now().After(deadline) {
			b.Fatalf("gateway not idle after the benchmark: %+v", st)
		}
		time.Sleep(time.Millisecond) // polling with a deadline
	}
}

// benchGateway has providers×models routes with lanes to spare, so no call ever queues or is
// refused: every Start is a full admission cycle (arrive → start → request actor → open →
// reply), every Close a release. The counter sees every message its actors are sent.
func benchGateway(b *testing.B, providers, models int) (*Gateway, []string, *mailboxCounter) {
	b.Helper()
	var ps []Provider
	var ids []string
	for p := range providers {
		pv := Provider{Name: fmt.Sprintf("p%d", p), Kind: "bench", Backend: instantBackend{}, Lanes: 4096,
			QueueLength: 64, QueueTimeout: time.Minute, RunTimeout: time.Minute}
		for m := range models {
			pv.Models = append(pv.Models, Model{Name: fmt.Sprintf("m%d", m), Lanes: 4096})
			ids = append(ids, fmt.Sprintf("p%d/m%d", p, m))
		}
		ps = append(ps, pv)
	}
	msgs := &mailboxCounter{}
	g, err := newGateway(Options{MaxRunning: 1 << 14, MaxAdmitted: 1 << 14, Providers: ps, Logger: zerolog.Nop()}, msgs)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := g.Shutdown(ctx); err != nil {
			b.Errorf("shutdown: %v", err)
		}
	})
	return g, ids, msgs
}

// BenchmarkAdmission measures admission cycles per second through the actor system: each
// iteration admits a call, which starts at once, and closes its stream, which gives the lanes
// back. Run with: go test -run '^$' -bench BenchmarkAdmission -benchtime 3s ./actors/
// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkAdmission(b *testing.B) {
	// The last case holds 2,000 calls open on its model the whole time, as a gateway does
	// with LLM calls in flight, and runs more cycles at once than a lane keeps
	// idle request actors, so that request actors are retired while thousands run.
	for _, c := range []struct {
		providers, models, parallelism, held int
	}{{1, 1, 8, 0}, {4, 2, 8, 0}, {4, 2, 64, 0}, {1, 1, 64, 2000}, {1, 1, 1024, 0}} {
		name := fmt.Sprintf("providers=%d/models=%d/clients=%dxGOMAXPROCS", c.providers, c.models, c.parallelism)
		if c.held > 0 {
			name += fmt.Sprintf("/held=%d", c.held)
		}
		b.Run(name, func(b *testing.B) {
			g, ids, msgs := benchGateway(b, c.providers, c.models)
			ctx := context.Background()
			req := &llm.Request{Messages: []llm.Message{{Role: "user", Content: llm.Content{Text: "hi"}}}}
			held := make([]llm.Stream, 0, c.held)
			for range c.held {
				sv, err := g.Start(ctx, ids[0], llm.Interactive, req)
				if err != nil {
					b.Fatalf("hold a call: %v", err)
				}
				held = append(held, sv.Stream)
			}
			b.SetParallelism(c.parallelism)
			b.ReportAllocs()
			cpu0 := cpuTime()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					id := ids[i%len(ids)]
					i++
					sv, err := g.Start(ctx, id, llm.Interactive, req)
					s := sv.Stream
					if err != nil {
						b.Errorf("start %s: %v", id, err)
						return
					}
					if _, err := s.Next(); err != io.EOF {
						b.Errorf("next: %v", err)
					}
					_ = s.Close()
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cycles/s")
			// CPU time per cycle is steadier than wall time on a shared machine; divided
			// into GOMAXPROCS cores it gives the rate this process could reach alone.
			perCycle := float64(cpuTime()-cpu0) / float64(b.N)
			b.ReportMetric(perCycle, "cpu-ns/cycle")
			b.ReportMetric(float64(runtime.GOMAXPROCS(0))*1e9/perCycle, "cpu-bound-cycles/s")
			msgsPerCall(b, g, ids, msgs, c.parallelism*runtime.GOMAXPROCS(0), countedCycles, c.held == 0)
			for _, s := range held {
				_ = s.Close()
			}
			// Every cycle must have given its lanes back: the benchmark measured full cycles.
			waitIdle(b, g)
		})
	}
}

// BenchmarkAdmissionLatency is one client's admission cycle, start to close, one after the
// other: its ns/op is the wall time a lone call (c=1) spends in admission, where
// BenchmarkAdmission's clients overlap their hops. Each hop wakes an actor's worker, so this
// counts hand-offs as much as CPU.
func BenchmarkAdmissionLatency(b *testing.B) {
	g, ids, msgs := benchGateway(b, 1, 1)
	ctx := context.Background()
	req := &llm.Request{Messages: []llm.Message{{Role: "user", Content: llm.Content{Text: "hi"}}}}
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		sv, err := g.Start(ctx, ids[0], llm.Interactive, req)
		if err != nil {
			b.Fatalf("start: %v", err)
		}
		if _, err := sv.Stream.Next(); err != io.EOF {
			b.Fatalf("next: %v", err)
		}
		_ = sv.Stream.Close()
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/cycle")
	msgsPerCall(b, g, ids, msgs, 1, countedCycles, true)
}

// countedCycles is how many cycles a benchmark runs after its timed ones to count their
// messages.
const countedCycles = 5000
