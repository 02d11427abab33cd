package actors

import (
	"runtime"
	"sync"
)

// poolDispatcher runs actor mailboxes on a few long-lived goroutines instead of protoactor's
// default of a new goroutine each time a mailbox gets work. A fresh goroutine starts with a
// small stack and grows it on every call path through Receive, which the admission
// benchmark's profile showed costly (docs/benchmarks.md). Pool workers keep their grown stacks.
//
// Schedule never blocks: when every worker is busy and the queue is full, or after stop, it
// falls back to a goroutine of its own, so a sender inside Receive cannot deadlock the pool.
type poolDispatcher struct {
	work       chan func() // a nil func tells one worker to exit
	quit       chan struct{}
	workers    int
	wg         sync.WaitGroup
	throughput int
	stopOnce   sync.Once
}

// newPoolDispatcher starts GOMAXPROCS workers, and at least two: with one (a container
// limited to one CPU), a single slow handler would hold every other mailbox behind it.
// throughput is how many messages a mailbox
// processes before it yields its worker (protoactor's default is 300).
func newPoolDispatcher(throughput int) *poolDispatcher {
	n := max(2, runtime.GOMAXPROCS(0))
	d := &poolDispatcher{work: make(chan func(), 1024), quit: make(chan struct{}), workers: n, throughput: throughput}
	d.wg.Add(n)
	for range n {
		go d.worker() // exits at stop
	}
	return d
}

// worker runs mailboxes until it takes stop's nil: a plain receive, not a select with the
// quit channel, since a worker wakes for every message an idle mailbox gets.
func (d *poolDispatcher) worker() {
	defer d.wg.Done()
	for fn := range d.work {
		if fn == nil {
			return
		}
		fn()
	}
}

// Schedule runs fn on a worker, or on a goroutine of its own when none can take it now.
func (d *poolDispatcher) Schedule(fn func()) {
	select {
	case <-d.quit:
		go fn() // after stop: late messages (dead letters) still get delivered
		return
	default:
	}
	select {
	case d.work <- fn:
	default:
		go fn()
	}
}

// Throughput is the mailbox batch size.
func (d *poolDispatcher) Throughput() int { return d.throughput }

// stop ends the workers once they have run what was queued; later Schedules spawn goroutines.
func (d *poolDispatcher) stop() {
	d.stopOnce.Do(func() {
		close(d.quit)
		for range d.workers {
			d.work <- nil // after what was queued: the workers run that first
		}
	})
	d.wg.Wait()
}
