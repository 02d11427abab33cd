package cluster

import (
	"context"
	"fmt"
	"time"
)

// heartbeat says this replica is alive and renews every lease it holds. While Redis is
// away it is the probe, and when Redis answers it is the rejoin: it registers every call
// the outage rule started (repeating for calls started during its own round trip), then
// the engine is Rejoining, or Shared at once when every peer seen before the outage has a
// fresh heartbeat. Entries released meanwhile are removed after it, never before: a
// heartbeat in flight would add them back.
func (e *Engine) heartbeat(ctx context.Context) error {
	for range 3 {
		again, err := e.beatOnce(ctx)
		if err != nil || !again {
			return err
		}
	}
	return nil // calls keep starting on the outage rule: the next tick tries again
}

// beatOnce is one heartbeat; again reports a rejoin that must register more calls.
func (e *Engine) beatOnce(ctx context.Context) (again bool, err error) {
	e.mu.Lock()
	if e.beating || e.closed {
		e.mu.Unlock()
		return false, nil
	}
	e.beating = true
	away := e.out != nil && e.rejoined.IsZero()
	snap := make([]*Lease, 0, len(e.leases))
	groups := map[string][]string{}
	for _, l := range e.leases {
		snap = append(snap, l)
		for _, s := range l.scopes {
			groups[s] = append(groups[s], l.member)
		}
	}
	e.mu.Unlock()

	sent := e.now()
	res, err := e.beat(ctx, groups)

	e.mu.Lock()
	e.beating = false
	if err != nil {
		if !ended(ctx) {
			e.lostLocked(err)
		}
		e.unlock()
		return false, err
	}
	e.lastBeat = sent
	for _, l := range snap {
		if e.leases[l.member] == l {
			l.valid = sent.Add(e.t.ttl - e.t.margin)
		}
	}
	e.seenLocked(res)
	switch {
	case away && e.unregisteredLocked():
		again = true
	case away:
		e.rejoined = e.now()
		e.foldLocked()
	case res.added > 0 && e.out == nil:
		e.health.LostLeases += uint64(res.added)
		e.log.Warn().Int64("entries", res.added).Msg("cluster: leases had expired unrenewed and were counted again")
	}
	if !e.rejoined.IsZero() && e.rejoinDoneLocked() {
		e.out, e.rejoined, e.local = nil, time.Time{}, nil
	}
	if e.out == nil || !e.rejoined.IsZero() {
		e.setPhaseLocked(e.phaseLocked(e.now()), nil)
	}
	pending, folds := e.pending, e.folds
	e.pending, e.folds = nil, nil
	e.unlock()
	e.flush(ctx, pending, folds)
	return again, nil
}

// unregisteredLocked reports a running call whose entries are not known to be in Redis.
func (e *Engine) unregisteredLocked() bool {
	for _, l := range e.leases {
		if l.valid.IsZero() {
			return true
		}
	}
	return false
}

// seenLocked records what a heartbeat saw: the replicas alive and their heartbeats' ages,
// and whether another process uses this replica's name.
func (e *Engine) seenLocked(res beatResult) {
	e.known, e.ages = res.names, res.ages
	e.health.ReplicasAlive = len(res.names)
	dup := res.previous != "" && res.previous != e.incarnation && e.health.Beats > 0
	if dup && !e.health.DuplicateName {
		e.log.Error().Msg("cluster: another process heartbeats with this replica's name: " +
			"replicas are undercounted; give each its own cluster.replica")
	}
	e.health.DuplicateName = dup
	e.health.Beats++
}

// rejoinDoneLocked reports whether every peer seen alive before the outage has a fresh
// heartbeat (younger than lease_ttl: it runs nothing Redis does not count, see Holding),
// or lease_ttl has passed since the rejoin (a peer still silent is dead or cut off).
func (e *Engine) rejoinDoneLocked() bool {
	if e.now().Sub(e.rejoined) >= e.t.ttl {
		return true
	}
	for _, name := range e.out.known {
		if age, ok := e.ages[name]; name != e.o.Replica && (!ok || age >= e.t.ttl-e.t.margin) {
			return false
		}
	}
	return true
}

// foldLocked queues, for every outage share of a bucket, the tokens it lent (and has not
// refilled yet), to be charged to the shared bucket by flush: the shared bucket then
// counts what this replica took while it could not, so the switch back adds no burst.
func (e *Engine) foldLocked() {
	now := e.now()
	for name, lb := range e.local {
		if taken := lb.b.Capacity() - lb.b.Level(now); taken > 0 {
			e.folds = append(e.folds, fold{name: name, perMinute: lb.perMinute, tokens: taken})
		}
	}
}

// fold is tokens lent by an outage share, to be charged to the shared bucket.
type fold struct {
	name      string
	perMinute int
	tokens    int
}

// flush removes pending entries from Redis and charges folded tokens. What fails stays
// pending; the failure is the next heartbeat's to notice.
func (e *Engine) flush(ctx context.Context, pending []entry, folds []fold) {
	ctx, cancel := context.WithTimeout(ctx, e.t.op)
	defer cancel()
	if err := e.release(ctx, pending); err != nil {
		e.mu.Lock()
		e.pending = append(e.pending, pending...)
		e.mu.Unlock()
	}
	for _, f := range folds {
		if err := adjustScript.Run(ctx, e.rdb, []string{e.ks.bucket(f.name)}, f.perMinute, f.tokens).Err(); err != nil {
			e.log.Warn().Err(err).Str("bucket", f.name).Msg("cluster: could not charge the shared bucket with the outage's tokens")
		}
	}
}

// beatResult is what the heartbeat script answered.
type beatResult struct {
	added    int64
	previous string // the incarnation that heartbeat with this name before
	names    []string
	ages     map[string]time.Duration
}

func (e *Engine) beat(ctx context.Context, groups map[string][]string) (beatResult, error) {
	keys := []string{e.ks.replicas(), e.ks.incarnations()}
	args := []any{e.o.Replica, e.incarnation, e.t.ttl.Milliseconds()}
	for scope, members := range groups {
		keys = append(keys, e.ks.scope(scope))
		args = append(args, len(members))
		for _, m := range members {
			args = append(args, m)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, e.t.op)
	defer cancel()
	res, err := heartbeatScript.Run(ctx, e.rdb, keys, args...).Slice()
	if err != nil {
		return beatResult{}, fmt.Errorf("cluster: heartbeat: %w", err)
	}
	return parseBeat(res)
}

// parseBeat decodes {added, previous, name1, age1, ...}.
func parseBeat(res []any) (beatResult, error) {
	bad := func() (beatResult, error) {
		return beatResult{}, fmt.Errorf("cluster: heartbeat: unexpected answer %v", res)
	}
	if len(res) < 2 || len(res)%2 != 0 {
		return bad()
	}
	added, ok1 := res[0].(int64)
	prev, ok2 := res[1].(string)
	if !ok1 || !ok2 {
		return bad()
	}
	out := beatResult{added: added, previous: prev, ages: map[string]time.Duration{}}
	for i := 2; i < len(res); i += 2 {
		name, ok1 := res[i].(string)
		age, ok2 := res[i+1].(int64)
		if !ok1 || !ok2 {
			return bad()
		}
		out.names = append(out.names, name)
		out.ages[name] = time.Duration(age) * time.Millisecond
	}
	return out, nil
}
