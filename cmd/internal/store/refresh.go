package store

import (
	"context"
	"fmt"
)

// Refresh reads the run-time keys again and takes what other replicas sharing the database
// changed: keys they made, limits they patched, secrets they rotated, keys they revoked. It
// returns the names it found revoked since the last look, whose waiting calls the caller
// answers. A key keeps its place (its spend and last use stay); a config key's name still
// wins over a run-time key's. Calls never wait for the database: the rows are read first,
// then applied under the lock calls take.
func (s *Store) Refresh(ctx context.Context) (revoked []string, err error) {
	s.admin.Lock() // an admin change of this replica lands whole before or after the read
	defer s.admin.Unlock()
	rows, err := s.readRuntimeKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: refresh keys: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.take(rows), nil
}

// take makes the run-time key rows read from the database the store's keys: a new name is
// added, a known run-time key takes the row's limits, secrets and revocation (keeping its
// spend and last use), a config key's name stays the config key's. It returns the names
// the rows revoke that were live; s.mu is held, or the store is not shared yet (load).
func (s *Store) take(rows []*key) (revoked []string) {
	for _, r := range rows {
		s.any = true
		k := s.keys[r.name]
		switch {
		case k == nil:
			s.keys[r.name] = r
			s.index(r)
		case k.config:
		default:
			if r.revoked && !k.revoked {
				revoked = append(revoked, k.name)
			}
			s.unindex(k)
			k.limits, k.digest, k.oldDigest, k.oldUntil, k.revoked = r.limits, r.digest, r.oldDigest, r.oldUntil, r.revoked
			s.index(k)
		}
	}
	return revoked
}

// Shared reports whether other replicas may share the store's database (PostgreSQL): they
// change its keys too, and Refresh brings their changes.
func (s *Store) Shared() bool { return s.postgres }
