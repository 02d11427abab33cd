package actors

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/actors/replicas"
)

// writeThrough carries the bindings this replica makes to the replicas' shared state
// without delaying any answer: bind leaves the binding in pending (the latest per
// conversation, so a burst of turns of one conversation is one write) and one goroutine
// writes what is pending in one bounded round trip per batch of at most replicas.MaxBind.
// While the shared state is away each write fails at once and its batch is dropped: the
// bindings made meanwhile stay this replica's own, and the next success of each
// conversation writes it again. Beyond maxPendingBinds waiting, new conversations' bindings
// are dropped, counted in the next write's log line.
type writeThrough struct {
	sh   replicas.Shared
	rule replicas.Affinity
	log  zerolog.Logger

	mu      sync.Mutex
	pending map[string]replicas.Binding // by Binding.Name
	dropped int                         // bindings refused since the last write

	wake    chan struct{} // 1-buffered: something is pending
	started atomic.Bool
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{} // closed when run has returned
}

// maxPendingBinds bounds the bindings waiting for their write: one batch.
const maxPendingBinds = replicas.MaxBind

func newWriteThrough(sh replicas.Shared, rule replicas.Affinity, log zerolog.Logger) *writeThrough {
	ctx, cancel := context.WithCancel(context.Background())
	return &writeThrough{sh: sh, rule: rule, log: log, pending: map[string]replicas.Binding{},
		wake: make(chan struct{}, 1), ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

// put leaves b to be written; it never blocks.
func (w *writeThrough) put(b replicas.Binding) {
	w.mu.Lock()
	if _, ok := w.pending[b.Name]; ok || len(w.pending) < maxPendingBinds {
		w.pending[b.Name] = b
	} else {
		w.dropped++
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default: // a write is asked for already
	}
}

// start runs the writer. Its goroutine exits when stop is called: a write in flight is
// cut off by its context.
func (w *writeThrough) start() {
	if !w.started.Swap(true) {
		go w.run()
	}
}

func (w *writeThrough) run() {
	defer close(w.done)
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-w.wake:
			if w.ctx.Err() == nil {
				w.write()
			}
		}
	}
}

// write sends what is pending in one round trip, bounded by sharedTimeout (the shared
// state bounds it more tightly itself).
func (w *writeThrough) write() {
	w.mu.Lock()
	bs := make([]replicas.Binding, 0, len(w.pending))
	for _, b := range w.pending {
		bs = append(bs, b)
	}
	clear(w.pending)
	dropped := w.dropped
	w.dropped = 0
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(w.ctx, sharedTimeout)
	defer cancel()
	if err := w.sh.Bind(ctx, bs, w.rule); err != nil && w.ctx.Err() == nil {
		w.log.Debug().Err(err).Int("bindings", len(bs)).Msg("session affinity: bindings not shared: the replicas' shared state did not take them")
	}
	if dropped > 0 {
		w.log.Warn().Int("dropped", dropped).Int("written", len(bs)).
			Msg("session affinity: bindings made faster than the replicas' shared state took them were not shared")
	}
}

// stop ends the writer and waits for it (a writer never started has nothing to wait for);
// a second call returns at once.
func (w *writeThrough) stop() {
	w.cancel()
	if w.started.Load() {
		<-w.done
	}
}
