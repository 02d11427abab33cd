package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/actors/replicas"
)

// Session affinity's shared bindings (SPEC §19): one hash of every conversation's binding
// and one sorted set of when each was last bound, both under the engine's hash tag. The
// scripts (lua/affinity_*.lua) read the server's clock, expire what is older than the
// rule's TTL and trim the table to the rule's Max, so Redis holds at most Max bindings
// and nothing once the replicas stop binding for a TTL.

// wireBinding is a binding as Redis holds it.
type wireBinding struct {
	Provider string `json:"p"`
	Key      int    `json:"k"`
	Model    string `json:"m"`
}

// Bounds of a stored binding: anyone who can write to the Redis can write one.
const (
	maxBindingBytes = 1 << 10
	maxBindingKey   = 1 << 16
)

var errBadBinding = errors.New("cluster: bad binding")

// Bound is the binding of conversation name (a replicas.AffinityScope) and how long ago it
// was last bound, on Redis's clock; ok is false when it has none live under rule's TTL.
// One round trip, bounded as every shared-state call is; ErrUnavailable at once while
// Redis is away.
func (e *Engine) Bound(ctx context.Context, name string, rule replicas.Affinity) (replicas.Binding, time.Duration, bool, error) {
	if err := checkRule(name, rule); err != nil {
		return replicas.Binding{}, 0, false, err
	}
	var res []any
	err := e.shared(ctx, func(ctx context.Context) error {
		var err error
		res, err = affinityBound.Run(ctx, e.rdb, []string{e.ks.affinity(), e.ks.affinityUsed()}, name, rule.TTL.Milliseconds()).Slice()
		if errors.Is(err, redis.Nil) {
			res, err = nil, nil
		}
		return err
	})
	if err != nil {
		return replicas.Binding{}, 0, false, fmt.Errorf("cluster: bound %s: %w", name, err)
	}
	if res == nil {
		return replicas.Binding{}, 0, false, nil
	}
	b, age, err := decodeBound(name, res)
	if err != nil {
		return replicas.Binding{}, 0, false, err
	}
	return b, age, true, nil
}

// decodeBound reads affinity_bound.lua's {binding, age_ms}.
func decodeBound(name string, res []any) (replicas.Binding, time.Duration, error) {
	if len(res) != 2 {
		return replicas.Binding{}, 0, fmt.Errorf("%w of %s: answer %v", errBadBinding, name, res)
	}
	s, ok1 := res[0].(string)
	age, ok2 := res[1].(int64)
	if !ok1 || !ok2 || age < 0 {
		return replicas.Binding{}, 0, fmt.Errorf("%w of %s: answer %v", errBadBinding, name, res)
	}
	b, err := decodeBinding(s)
	if err != nil {
		return replicas.Binding{}, 0, fmt.Errorf("%w of %s: %v", errBadBinding, name, err)
	}
	b.Name = name
	return b, time.Duration(age) * time.Millisecond, nil
}

// decodeBinding parses a stored binding, refusing one no replica would have written.
func decodeBinding(s string) (replicas.Binding, error) {
	if len(s) > maxBindingBytes {
		return replicas.Binding{}, fmt.Errorf("%d bytes", len(s))
	}
	var w wireBinding
	if err := json.Unmarshal([]byte(s), &w); err != nil {
		return replicas.Binding{}, err
	}
	if w.Provider == "" || w.Model == "" || w.Key < 0 || w.Key >= maxBindingKey {
		return replicas.Binding{}, fmt.Errorf("provider %q, key %d, model %q", w.Provider, w.Key, w.Model)
	}
	return replicas.Binding{Provider: w.Provider, Key: w.Key, Model: w.Model}, nil
}

// Bind records each of bs as bound now under rule, in one round trip that also forgets
// what expired and what is beyond rule.Max. At most replicas.MaxBind bindings a call:
// they travel as one script's arguments.
func (e *Engine) Bind(ctx context.Context, bs []replicas.Binding, rule replicas.Affinity) error {
	if len(bs) == 0 {
		return nil
	}
	if len(bs) > replicas.MaxBind {
		return fmt.Errorf("cluster: bind: %d bindings in one call, at most %d", len(bs), replicas.MaxBind)
	}
	args := make([]any, 3, 3+2*len(bs))
	args[0], args[1], args[2] = rule.TTL.Milliseconds(), rule.Max, e.ks.affinityAt()
	for _, b := range bs {
		if err := checkRule(b.Name, rule); err != nil {
			return err
		}
		v, err := json.Marshal(wireBinding{Provider: b.Provider, Key: b.Key, Model: b.Model})
		if err != nil {
			return fmt.Errorf("cluster: bind %s: %w", b.Name, err)
		}
		if _, err := decodeBinding(string(v)); err != nil {
			return fmt.Errorf("cluster: bind %s: %w", b.Name, err)
		}
		args = append(args, b.Name, string(v))
	}
	err := e.shared(ctx, func(ctx context.Context) error {
		return affinityBind.Run(ctx, e.rdb, []string{e.ks.affinity(), e.ks.affinityUsed()}, args...).Err()
	})
	if err != nil {
		return fmt.Errorf("cluster: bind %d bindings: %w", len(bs), err)
	}
	return nil
}

// Bindings is how many conversations are bound to each of providers, cluster-wide, live
// under rule's TTL on Redis's clock. One round trip, bounded as every shared-state call
// is; ErrUnavailable at once while Redis is away.
func (e *Engine) Bindings(ctx context.Context, providers []string, rule replicas.Affinity) (map[string]int, error) {
	if len(providers) == 0 {
		return map[string]int{}, nil
	}
	if rule.TTL < time.Millisecond {
		return nil, fmt.Errorf("cluster: bindings: the rule needs a TTL of at least 1ms, got %s", rule.TTL)
	}
	keys := make([]string, len(providers))
	for i, p := range providers {
		if err := checkName("provider", p); err != nil {
			return nil, fmt.Errorf("cluster: bindings: %w", err)
		}
		keys[i] = e.ks.affinityAt() + p
	}
	var res []int64
	err := e.shared(ctx, func(ctx context.Context) error {
		var err error
		res, err = affinityCount.Run(ctx, e.rdb, keys, rule.TTL.Milliseconds()).Int64Slice()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: bindings of %d providers: %w", len(providers), err)
	}
	if len(res) != len(providers) {
		return nil, fmt.Errorf("cluster: bindings of %d providers: %d counts", len(providers), len(res))
	}
	out := make(map[string]int, len(providers))
	for i, p := range providers {
		out[p] = int(res[i])
	}
	return out, nil
}

// checkRule reports what is wrong with a binding's name or the rule it is kept under.
func checkRule(name string, rule replicas.Affinity) error {
	if err := checkName("binding", name); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	if rule.TTL < time.Millisecond || rule.Max < 1 {
		return fmt.Errorf("cluster: binding %s: the rule needs a TTL of at least 1ms and a Max of at least 1, got %s and %d", name, rule.TTL, rule.Max)
	}
	return nil
}
