package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"
	"golang.org/x/time/rate"
)

// A key made on another replica sharing the database is known here at the next Refresh
// (at most a second later). So that it works at once, a secret this replica does not know
// is looked up in the database by its digest, bounded four ways: one query at a time per
// digest (the calls presenting it share it), none for a digest the database did not have
// within missedFor (a wrong secret sent over and over costs one query a second), at most
// missedRate queries a second for the replica (a flood of random secrets cannot load the
// database), each cut off after missedTimeout. Past the cap, or when the database is slow
// or away, the call is answered as without the lookup: 401.
const (
	missedFor     = time.Second
	missedRate    = 50
	missedTimeout = 300 * time.Millisecond
	missedKept    = 4096 // digests remembered as unknown, least recently used forgotten first
)

// missedLookups is the state of the digest lookups: their shared flights, the digests
// the database did not have (until when they are not asked again), and the rate cap.
type missedLookups struct {
	flight  singleflight.Group
	unknown *lru.Cache[[sha256.Size]byte, time.Time]
	limit   *rate.Limiter
}

func newMissedLookups() *missedLookups {
	unknown, err := lru.New[[sha256.Size]byte, time.Time](missedKept)
	if err != nil {
		panic("store: " + err.Error()) // only for a size below 1
	}
	return &missedLookups{unknown: unknown, limit: rate.NewLimiter(missedRate, missedRate)}
}

var errMissedCapped = errors.New("store: digest lookups at their rate cap")

// lookupMissed looks digest d up in the database and takes the key it finds, if its name
// is new here. A key this replica knows by name (rotated elsewhere) is left to the next
// Refresh, which also answers its waiting calls if it was revoked.
func (s *Store) lookupMissed(ctx context.Context, d [sha256.Size]byte) {
	m := s.missed
	now := s.opts.Now()
	if until, ok := m.unknown.Get(d); ok && now.Before(until) {
		return
	}
	_, err, _ := m.flight.Do(string(d[:]), func() (any, error) {
		if !m.limit.AllowN(now, 1) {
			return nil, errMissedCapped
		}
		// The flight is shared: one caller's hang-up must not cut it for the others.
		qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), missedTimeout)
		defer cancel()
		h := hex.EncodeToString(d[:])
		rows, err := s.readKeys(qctx, "digest = $1 OR old_digest = $2", h, h)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		var fresh []*key
		for _, r := range rows {
			if s.keys[r.name] == nil {
				fresh = append(fresh, r)
			}
		}
		if len(fresh) == 0 {
			m.unknown.Add(d, now.Add(missedFor))
			return nil, nil
		}
		s.take(fresh)
		s.log.Info().Str("client", fresh[0].name).Msg("client key made on another replica taken at its first use here")
		return nil, nil
	})
	if err != nil {
		s.log.Debug().Err(err).Msg("a client key this replica does not know was not looked up in the shared store; the call is refused as unknown")
	}
}
