package cluster

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// Client keys' spend across the replicas (SPEC §18, "Several replicas"): per key and
// calendar period, one Redis counter of micro-USD that every replica adds its calls' cost
// to and reads, so that a budget holds cluster-wide. The ledger stays in the store.

// Period is one key's calendar period: its spend counter's identity.
type Period struct {
	Key        string    // the client key's name
	Start, End time.Time // [Start, End) in UTC
}

// spendKeepsFor is how long a period's counter outlives the period: long enough for a
// replica whose clock is a little behind to still read it.
const spendKeepsFor = 24 * time.Hour

func (k keyspace) spend(p Period) string {
	return k.tag + ":spend:" + p.Key + ":" + strconv.FormatInt(p.Start.Unix(), 10) + "-" + strconv.FormatInt(p.End.Unix(), 10)
}

// AddSpend adds micro µUSD to p's counter and returns the period's total across the
// replicas. A counter not there yet starts at seed (what this replica knows of the period,
// this call included) instead. It answers ErrUnavailable at once while Redis is away.
func (e *Engine) AddSpend(ctx context.Context, p Period, micro, seed int64) (total int64, err error) {
	if err := checkName("client key", p.Key); err != nil {
		return 0, fmt.Errorf("cluster: %w", err)
	}
	err = e.shared(ctx, func(ctx context.Context) error {
		var err error
		total, err = spendScript.Run(ctx, e.rdb, []string{e.ks.spend(p)}, seed, micro, p.End.Add(spendKeepsFor).UnixMilli()).Int64()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("cluster: spend of %s: %w", p.Key, err)
	}
	return total, nil
}

// Spends reads the counters of ps in one round trip: per period, its total in micro-USD,
// or -1 when no replica has counted anything in it yet. It answers ErrUnavailable at once
// while Redis is away.
func (e *Engine) Spends(ctx context.Context, ps []Period) ([]int64, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	keys := make([]string, len(ps))
	for i, p := range ps {
		keys[i] = e.ks.spend(p)
	}
	vals, err := e.mget(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("cluster: spends: %w", err)
	}
	out := make([]int64, len(ps))
	for i, v := range vals {
		out[i] = -1
		if s, ok := v.(string); ok {
			if n, err := strconv.ParseInt(s, 10, 64); err == nil {
				out[i] = n
			}
		}
	}
	return out, nil
}
