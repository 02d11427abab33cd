package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/actors/replicas"
)

// shared runs one Redis operation for the shared-state calls: ErrUnavailable at once while
// Redis is away; a failure (other than the caller's ctx ending) asks for a heartbeat at
// once, which decides whether Redis is away.
func (e *Engine) shared(ctx context.Context, op func(ctx context.Context) error) error {
	e.mu.Lock()
	away := e.out != nil && e.rejoined.IsZero() || e.closed
	e.mu.Unlock()
	if away {
		return ErrUnavailable
	}
	octx, cancel := context.WithTimeout(ctx, e.t.op)
	defer cancel()
	err := op(octx)
	if err != nil && !ended(ctx) {
		e.kickLoop()
	}
	return err
}

// mget reads keys in one round trip, as shared runs it.
func (e *Engine) mget(ctx context.Context, keys []string) ([]any, error) {
	var vals []any
	err := e.shared(ctx, func(ctx context.Context) error {
		var err error
		vals, err = e.rdb.MGet(ctx, keys...).Result()
		return err
	})
	return vals, err
}

// Cool makes the shared cooldown name (a key's, or anything else that rests for a while
// on every replica at once) last at least d from now, never shortening it, and tells every
// replica (Event Cooled) when it grew. It returns how long it now has left. d is cut to
// a day; it must be positive.
func (e *Engine) Cool(ctx context.Context, name string, d time.Duration) (time.Duration, error) {
	if err := checkName("cooldown", name); err != nil {
		return 0, fmt.Errorf("cluster: %w", err)
	}
	ms := min(d.Milliseconds(), maxCoolMS)
	if ms <= 0 {
		return 0, fmt.Errorf("cluster: cooldown %s: must last at least 1ms, got %s", name, d)
	}
	var left int64
	err := e.shared(ctx, func(ctx context.Context) error {
		var err error
		left, err = coolScript.Run(ctx, e.rdb, []string{e.ks.cool(name)}, ms, e.ks.events(), e.o.Replica, name).Int64()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("cluster: cool %s: %w", name, err)
	}
	return time.Duration(left) * time.Millisecond, nil
}

// Cooldowns is how long each of names still cools (absent: not cooling), for the replica
// that starts, rejoins or missed a notice.
func (e *Engine) Cooldowns(ctx context.Context, names []string) (map[string]time.Duration, error) {
	cmds := make([]*redis.DurationCmd, len(names))
	err := e.shared(ctx, func(ctx context.Context) error {
		_, err := e.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, n := range names {
				cmds[i] = p.PTTL(ctx, e.ks.cool(n))
			}
			return nil
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: cooldowns: %w", err)
	}
	out := map[string]time.Duration{}
	for i, c := range cmds {
		if d := c.Val(); d > 0 {
			out[names[i]] = d
		}
	}
	return out, nil
}

// Learn records that scope takes lanes lanes (a backend's learned capacity, SPEC §11) and
// tells every replica (Event Learned), as a compare-and-set for growth: a value lower than
// the stored one always replaces it; a higher one replaces it only while the stored value
// is still was, the one this replica last saw stored (0: none seen), else it is refused.
// It returns the value stored after: lanes, or on a refusal the stored (lower) value the
// caller should adopt. The value has no expiry; each reader clamps it to its configured
// lanes.
func (e *Engine) Learn(ctx context.Context, scope string, lanes, was int) (int, error) {
	if err := checkName("scope", scope); err != nil {
		return 0, fmt.Errorf("cluster: %w", err)
	}
	if lanes < 1 {
		return 0, fmt.Errorf("cluster: learned lanes of %s must be at least 1, got %d", scope, lanes)
	}
	var stored int64
	err := e.shared(ctx, func(ctx context.Context) error {
		var err error
		stored, err = lanesScript.Run(ctx, e.rdb, []string{e.ks.lanes(scope)}, lanes, max(was, 0), e.ks.events(), e.o.Replica, scope).Int64()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("cluster: learn %s: %w", scope, err)
	}
	return int(stored), nil
}

// Learned is the lanes learned for each of scopes (absent: none learned).
func (e *Engine) Learned(ctx context.Context, scopes []string) (map[string]int, error) {
	keys := make([]string, len(scopes))
	for i, s := range scopes {
		keys[i] = e.ks.lanes(s)
	}
	vals, err := e.mget(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("cluster: learned: %w", err)
	}
	out := map[string]int{}
	for i, v := range vals {
		var n int
		if s, ok := v.(string); ok {
			if _, err := fmt.Sscan(s, &n); err == nil && n > 0 {
				out[scopes[i]] = n
			}
		}
	}
	return out, nil
}

// Adjust corrects an earlier charge on bucket b by delta tokens (a tpm estimate replaced by
// the usage the backend reported): negative refunds, positive charges more. While Redis is
// away it corrects this replica's outage share instead.
func (e *Engine) Adjust(ctx context.Context, b replicas.Bucket, delta int) error {
	b.Cost = 0 // not a charge: delta is
	if err := checkBucket(&b); err != nil {
		return err
	}
	if delta == 0 {
		return nil
	}
	e.mu.Lock()
	if lb := e.local[b.Name]; lb != nil {
		lb.b.Adjust(delta, e.now())
	}
	away := e.out != nil && e.rejoined.IsZero()
	e.mu.Unlock()
	if away {
		return nil
	}
	err := e.shared(ctx, func(ctx context.Context) error {
		return adjustScript.Run(ctx, e.rdb, []string{e.ks.bucket(b.Name)}, b.PerMinute, delta).Err()
	})
	if err != nil {
		return fmt.Errorf("cluster: adjust %s: %w", b.Name, err)
	}
	return nil
}

// Occupancy is, per scope, how many live leases each replica holds in it: the
// cluster-wide running counts /admin/state shows beside the replica's own, and who holds
// what.
func (e *Engine) Occupancy(ctx context.Context, scopes []string) (map[string]map[string]int, error) {
	keys := make([]string, len(scopes))
	for i, s := range scopes {
		keys[i] = e.ks.scope(s)
	}
	var res []any
	err := e.shared(ctx, func(ctx context.Context) error {
		var err error
		res, err = occupancyScript.Run(ctx, e.rdb, keys).Slice()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: occupancy: %w", err)
	}
	return parseOccupancy(scopes, res)
}

// parseOccupancy decodes {n1, member..., n2, member..., ...}.
func parseOccupancy(scopes []string, res []any) (map[string]map[string]int, error) {
	out := make(map[string]map[string]int, len(scopes))
	i := 0
	for _, s := range scopes {
		if i >= len(res) {
			return nil, fmt.Errorf("cluster: occupancy: answer too short")
		}
		n, ok := res[i].(int64)
		if !ok || n < 0 || i+1+int(n) > len(res) {
			return nil, fmt.Errorf("cluster: occupancy: bad count for %s", s)
		}
		by := map[string]int{}
		for _, m := range res[i+1 : i+1+int(n)] {
			if str, ok := m.(string); ok {
				by[memberReplica(str)]++
			}
		}
		out[s] = by
		i += 1 + int(n)
	}
	return out, nil
}
