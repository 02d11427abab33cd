package actors

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tollgate/tollgate/actors/replicas"
)

// The replicas' rate-limit buckets beyond a call's first acquire (SPEC §10, §17). A call's
// leases charge its provider's rpm and tpm and its first key's key_rate_limit once, at the
// estimate. What a call sends afterwards is corrected the way the local limiter corrects
// it: each retry charges one more request (and its estimate) to the provider's buckets and
// to the key it retries on (a retry keeps its lane and is not held back, but what it sends
// counts), and the usage the backend reports replaces the estimate in the tpm buckets. All
// of it is one bounded round trip per call off the actor's goroutine; a correction lost
// to a Redis outage leaves the shared bucket at the estimate.
//
// A key whose shared key_rate_limit has no tokens for a call rests on this replica until
// the bucket says (restKey): the call goes back to its place and the next grant picks the
// next key in the ring's turn, or, with every key resting, waits in its queue as for keys
// that cool, answered 429 upstream_rate_limited only when the wait would pass its
// queue_timeout.

// keyName is the shared name of key key of call c's pool when the replicas share its
// key_rate_limit (replicas.KeyScope), or "" when they do not: no shared state, no key_rate_limit, or
// a pool without real keys.
func (rl replicaLink) keyName(c *call, key int) string {
	a := rl.a
	kr := a.pv.KeyRateLimit
	if a.g.opts.Shared == nil || kr.RPM <= 0 && kr.TPM <= 0 {
		return ""
	}
	pl, _ := a.pol.Limiters().Keys(c.route.m)
	if !a.health.Keyed(pl) {
		return ""
	}
	return replicas.KeyScope(a.name, pl, key)
}

// keyBuckets are the shared buckets of key key (a replicas.KeyScope; "" has none) under rate limit
// kr, charged for one request estimated at tokens.
func keyBuckets(kr RateLimit, key string, tokens int) []replicas.Bucket {
	if key == "" {
		return nil
	}
	var bs []replicas.Bucket
	if kr.RPM > 0 {
		bs = append(bs, replicas.Bucket{Name: replicas.KeyRateScope(key), PerMinute: kr.RPM, Burst: kr.Burst, Cost: 1})
	}
	if kr.TPM > 0 && tokens > 0 {
		bs = append(bs, replicas.Bucket{Name: replicas.KeyTokenScope(key), PerMinute: kr.TPM, Cost: tokens})
	}
	return bs
}

// sharedKeyLimit is what keysRefusal adds to say keys may rest for their key_rate_limit
// shared by the replicas too (restKey), or "".
func (rl replicaLink) sharedKeyLimit() string {
	a := rl.a
	if kr := a.pv.KeyRateLimit; a.g.opts.Shared != nil && (kr.RPM > 0 || kr.TPM > 0) {
		return fmt.Sprintf(" or at their key_rate_limit (rpm %d, tpm %d) shared by the replicas", kr.RPM, kr.TPM)
	}
	return ""
}

// isKeyBucket reports whether bucket name is a key's (replicas.KeyRateScope, replicas.KeyTokenScope).
func isKeyBucket(name string) bool {
	return strings.HasPrefix(name, "rpm/key/") || strings.HasPrefix(name, "tpm/key/")
}

// keyRefused reports whether the replicas refused a call on the key named keyName (a
// replicas.KeyScope; "" has none) because its shared bucket has no tokens now.
func keyRefused(b *replicas.Busy, keyName string) bool {
	return keyName != "" && b.Scope == "" &&
		(b.Bucket == replicas.KeyRateScope(keyName) || b.Bucket == replicas.KeyTokenScope(keyName))
}

// restKey rests key key of call c's pool on this replica for wait, the time its shared
// bucket needs for the call's tokens, so that the next grant picks another key; the calls
// no key can serve in time are answered (keysChanged).
func (rl replicaLink) restKey(c *call, key int, wait time.Duration, now time.Time) {
	a := rl.a
	pl, ring := a.pol.Limiters().Keys(c.route.m)
	if key < 0 || key >= ring.Len() {
		return
	}
	wait = max(wait, time.Millisecond) // a wait under the script's millisecond still rests it
	ring.RateLimited(key, wait, now)
	a.g.log.Debug().Str("provider", a.name).Str("model", c.route.id).Int("key", key).Dur("for", wait).
		Msg("key at its key_rate_limit across the replicas: it rests until its bucket has the tokens")
	a.vitals.keysChanged(pl, now)
}

// chargeRetry counts one more attempt of run r's call, leased as its stream says (m), on
// key, in the shared buckets: the provider's it was charged and the retry key's own, which
// become the ones its usage corrects. It returns the buckets charged now, which the stream
// keeps (nil when not leased).
func (rl replicaLink) chargeRetry(r *run, key int, m *retryAsk) []replicas.Bucket {
	a := rl.a
	if !m.leased {
		// Not leased: no shared state, or a call of before the replicas shared it. (Not
		// m.charged: a claim without buckets, no rate_limit, charged nothing yet.)
		return m.charged
	}
	r.keyName = rl.keyName(r.c, key)
	var out []replicas.Bucket
	for _, b := range m.charged {
		if !isKeyBucket(b.Name) {
			out = append(out, b)
		}
	}
	out = append(out, keyBuckets(a.pv.KeyRateLimit, r.keyName, r.c.tokens)...)
	rl.adjustShared(charges(out))
	return out
}

// chargeKey counts the key a leased batch member (run r, lease ml) starts on in the shared
// buckets: its leases were taken before its key was chosen (leaseBatch), so the key is
// counted, not held back. It returns the buckets the member has charged.
func (rl replicaLink) chargeKey(r *run, ml memberLease) []replicas.Bucket {
	a := rl.a
	kb := keyBuckets(a.pv.KeyRateLimit, r.keyName, r.c.tokens)
	if ml.lease == nil || len(kb) == 0 {
		return ml.charged // not leased (see chargeRetry), or its key has no shared bucket
	}
	rl.adjustShared(charges(kb))
	return append(slices.Clip(ml.charged), kb...)
}

// charges are the adjustments that charge each of bs its cost once more.
func charges(bs []replicas.Bucket) []adjustment {
	adj := make([]adjustment, len(bs))
	for i, b := range bs {
		adj[i] = adjustment{b: b, delta: b.Cost}
	}
	return adj
}

// correctShared replaces the estimate a call's last attempt charged to the shared tpm
// buckets bs by the tokens the backend reported it used (none reported: the estimate
// stands). It runs once per call, as its lanes are freed.
func (rl replicaLink) correctShared(bs []replicas.Bucket, used int) {
	if used <= 0 {
		return
	}
	var adj []adjustment
	for _, b := range bs {
		if strings.HasPrefix(b.Name, "tpm/") && used != b.Cost {
			adj = append(adj, adjustment{b: b, delta: used - b.Cost})
		}
	}
	rl.adjustShared(adj)
}

// adjustment is one correction of a shared bucket.
type adjustment struct {
	b     replicas.Bucket
	delta int
}

// adjustShared applies adj to the shared buckets off the actor's goroutine.
func (rl replicaLink) adjustShared(adj []adjustment) {
	a := rl.a
	sh := a.g.opts.Shared
	if sh == nil || len(adj) == 0 {
		return
	}
	log := a.g.log
	go func() { // exits after at most len(adj) round trips, bounded by sharedTimeout together
		ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
		defer cancel()
		for _, x := range adj {
			if err := sh.Adjust(ctx, x.b, x.delta); err != nil {
				log.Debug().Err(err).Str("bucket", x.b.Name).Msg("shared bucket not corrected: the replicas' shared state did not take it")
				return
			}
		}
	}()
}
