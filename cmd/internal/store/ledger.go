package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/tollgate/tollgate/httpapi"
)

// ledger writes finished calls to the database from a bounded buffer, in batches, on its own
// goroutine: Record never waits for the database. A failed write is retried (with backoff)
// until it succeeds; past the buffer's size the oldest entries not being written are
// dropped, counted and logged.
type ledger struct {
	s    *Store
	size int

	mu       sync.Mutex
	pending  []entry
	inflight int             // pending[:inflight] is being written
	touched  map[string]bool // keys whose last_used_at is to be written
	drained  chan struct{}   // closed when pending and touched are empty; nil while they are
	dropped  int

	wake chan struct{}
	stop chan context.Context
	done chan error
}

// entry is a ledger entry with the id that makes its insert idempotent: a retried batch whose
// first try committed without our hearing of it inserts nothing twice.
type entry struct {
	id string
	httpapi.LedgerEntry
}

// batchSize caps the entries one transaction writes.
const batchSize = 256

func startLedger(s *Store, size int) *ledger {
	l := &ledger{s: s, size: size, touched: map[string]bool{}, wake: make(chan struct{}, 1),
		stop: make(chan context.Context), done: make(chan error, 1)}
	go l.run()
	return l
}

// add queues e, dropping the oldest waiting entry when the buffer is full.
func (l *ledger) add(e httpapi.LedgerEntry) {
	var id [12]byte
	_, _ = rand.Read(id[:])
	l.mu.Lock()
	if len(l.pending) >= l.size && len(l.pending) > l.inflight {
		l.pending = append(l.pending[:l.inflight], l.pending[l.inflight+1:]...)
		l.dropped++
		n := l.dropped
		l.mu.Unlock()
		l.s.log.Warn().Int("dropped_total", n).Msg("ledger buffer full: dropped the oldest entry not yet written")
		if l.s.opts.OnDrop != nil {
			l.s.opts.OnDrop(1)
		}
		l.mu.Lock()
	}
	l.pending = append(l.pending, entry{id: hex.EncodeToString(id[:]), LedgerEntry: e})
	l.mu.Unlock()
	l.poke()
}

// touch queues name's last_used_at for writing.
func (l *ledger) touch(name string) {
	l.mu.Lock()
	l.touched[name] = true
	l.mu.Unlock()
	l.poke()
}

func (l *ledger) poke() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// run writes until close.
func (l *ledger) run() {
	ctx := context.Background()
	wait := 100 * time.Millisecond
	for {
		select {
		case <-l.wake:
		case cctx := <-l.stop:
			l.done <- l.drain(cctx)
			return
		}
		for {
			n, err := l.writeOnce(ctx)
			if err == nil {
				wait = 100 * time.Millisecond
				if n == 0 {
					break
				}
				continue
			}
			l.s.log.Warn().Err(err).Dur("retry_in", wait).Msg("ledger write failed; the entries stay buffered")
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case cctx := <-l.stop:
				t.Stop()
				l.done <- l.drain(cctx)
				return
			}
			wait = min(wait*2, 5*time.Second)
		}
	}
}

// drain writes what remains until ctx ends.
func (l *ledger) drain(ctx context.Context) error {
	for {
		n, err := l.writeOnce(ctx)
		switch {
		case err != nil:
			l.mu.Lock()
			left := len(l.pending)
			l.mu.Unlock()
			return fmt.Errorf("store: ledger: %d entries not written at close: %w", left, err)
		case n == 0:
			return nil
		}
	}
}

// writeOnce writes the next batch and the touched keys in one transaction; it returns how
// many entries and keys it wrote.
func (l *ledger) writeOnce(ctx context.Context) (int, error) {
	l.mu.Lock()
	l.inflight = min(len(l.pending), batchSize)
	batch := append([]entry(nil), l.pending[:l.inflight]...)
	touched := l.touched
	l.touched = map[string]bool{}
	l.mu.Unlock()
	if len(batch) == 0 && len(touched) == 0 {
		l.settle(0)
		return 0, nil
	}
	if err := l.s.write(ctx, batch, touched); err != nil {
		l.mu.Lock()
		l.inflight = 0
		for n := range touched {
			l.touched[n] = true
		}
		l.mu.Unlock()
		return 0, err
	}
	l.settle(len(batch))
	return len(batch) + len(touched), nil
}

// settle removes the n entries written and wakes flushes when nothing is left.
func (l *ledger) settle(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending = append(l.pending[:0], l.pending[n:]...)
	l.inflight = 0
	if len(l.pending) == 0 && len(l.touched) == 0 && l.drained != nil {
		close(l.drained)
		l.drained = nil
	}
}

// flush waits until everything added so far is written.
func (l *ledger) flush(ctx context.Context) error {
	l.mu.Lock()
	if len(l.pending) == 0 && len(l.touched) == 0 {
		l.mu.Unlock()
		return nil
	}
	if l.drained == nil {
		l.drained = make(chan struct{})
	}
	ch := l.drained
	l.mu.Unlock()
	l.poke()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close stops the writer after it has written what it holds, or when ctx ends.
func (l *ledger) close(ctx context.Context) error {
	l.stop <- ctx
	return <-l.done
}

// write inserts batch and updates the touched keys' last_used_at in one transaction.
func (s *Store) write(ctx context.Context, batch []entry, touched map[string]bool) error {
	// The keys' times are read before the transaction: the admin methods hold s.mu while
	// they write, and SQLite's one connection is the transaction's until it ends.
	s.mu.Lock()
	last := map[string]int64{}
	for n := range touched {
		if k := s.keys[n]; k != nil && !k.lastUsed.IsZero() {
			last[n] = ms(k.lastUsed)
		}
	}
	s.mu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	ins := s.q(`INSERT INTO ledger (entry_id, at, day, request_id, client, route, provider, model, served_model,
		tokens_in, cached_in, tokens_out, reasoning, cost_usd, status, code, attempts, queue_ms, run_ms)
		VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18,$19) ON CONFLICT (entry_id) DO NOTHING`)
	for _, e := range batch {
		u := e.Usage
		if _, err := tx.ExecContext(ctx, ins, e.id, ms(e.At), e.At.UTC().Format(time.DateOnly), e.RequestID, e.Key,
			e.Route, e.Provider, e.Model, e.ServedModel, u.PromptTokens, u.CachedTokens, u.CompletionTokens,
			u.ReasoningTokens, e.CostUSD, e.Status, e.Code, e.Attempts, e.QueueMs, e.RunMs); err != nil {
			return err
		}
	}
	if len(last) > 0 {
		up := s.q(`INSERT INTO key_activity (name, first_seen, last_used_at) VALUES ($1, $2, $2)
			ON CONFLICT (name) DO UPDATE SET last_used_at = $2`)
		for n, at := range last {
			if _, err := tx.ExecContext(ctx, up, n, at); err != nil {
				return err
			}
		}
	}
	return tx.Commit()
}
