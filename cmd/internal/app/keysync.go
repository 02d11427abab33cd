package app

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/actors"
	"github.com/tollgate/tollgate/cmd/internal/store"
)

// keysRefreshEvery is how often a replica on a shared store reads the run-time keys again:
// how long a key made, patched, rotated or revoked on another replica may be unknown here.
const keysRefreshEvery = time.Second

// keySync keeps the run-time client keys of a replica whose store other replicas share
// (PostgreSQL) in step with theirs (SPEC §18, "Several replicas"): each interval it reads
// them again (store.Refresh), and answers 401 the waiting calls of a key revoked elsewhere,
// as a revocation on this replica does. A database that does not answer leaves the keys as
// last read; calls never wait for it.
type keySync struct {
	st    *store.Store
	g     *actors.Gateway
	log   zerolog.Logger
	every time.Duration
	stop  chan struct{}
	done  chan struct{}
}

// startKeySync refreshes st's keys every interval until close.
func startKeySync(st *store.Store, g *actors.Gateway, every time.Duration, log zerolog.Logger) *keySync {
	k := &keySync{st: st, g: g, log: log, every: every, stop: make(chan struct{}), done: make(chan struct{})}
	go k.run() // exits on close
	return k
}

func (k *keySync) run() {
	defer close(k.done)
	t := time.NewTicker(k.every)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-k.stop:
			return
		case <-t.C:
		}
		err := k.refresh()
		switch {
		case err != nil && !failing:
			k.log.Warn().Err(err).Msg("client keys not refreshed from the shared store; the keys last read stay in force")
		case err == nil && failing:
			k.log.Info().Msg("client keys refreshed from the shared store again")
		}
		failing = err != nil
	}
}

// refresh reads the keys once, bounded by the interval, and answers the calls of those
// revoked since.
func (k *keySync) refresh() error {
	ctx, cancel := context.WithTimeout(context.Background(), k.every)
	defer cancel()
	revoked, err := k.st.Refresh(ctx)
	for _, name := range revoked {
		n := k.g.RevokeClient(name)
		k.log.Info().Str("client", name).Int("queued_answered", n).Msg("client key revoked on another replica")
	}
	return err
}

func (k *keySync) close() {
	close(k.stop)
	<-k.done
}
