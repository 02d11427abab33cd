package actors

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tollgate/tollgate/actors/replicas"
	"github.com/tollgate/tollgate/providers/llm"
)

// A client key's rate_limit across the replicas (SPEC §18, "Several replicas"). With
// several replicas a key's buckets are the replicas' shared buckets (replicas.ClientRateScope,
// replicas.ClientTokenScope: named by the key's name, each holding one minute's worth, as
// tokens.PerKey's), and this replica's own PerKey is not charged, so nothing counts twice.
// The rule is the one-replica rule, on the shared buckets: a call takes its request and
// estimated tokens as it enters, before it comes to its provider's queue; when they are not
// there it waits the time the shared bucket says and asks again, as long as its wait so far
// and the next one stay within its provider's queue_timeout, and is answered 429
// client_rate_limited with that wait as Retry-After otherwise, charged nothing. A call that
// never reaches a backend gives its charge back, and the usage its backend reports replaces
// the estimate in the tpm bucket (Shared.Adjust, off the caller's goroutine). With Redis
// away the replicas' shared state decides by the outage rule (each replica on its share of
// the rate); a call whose acquire Redis could not decide either way (the round trip failed
// before the heartbeat's verdict) is charged this replica's own buckets instead.

// clientBuckets are client c's shared buckets, charged reqs requests and toks tokens.
func clientBuckets(c llm.Client, reqs, toks int) []replicas.Bucket {
	var bs []replicas.Bucket
	if c.RPM > 0 {
		bs = append(bs, replicas.Bucket{Name: replicas.ClientRateScope(c.Name), PerMinute: c.RPM, Burst: c.RPM, Cost: reqs})
	}
	if c.TPM > 0 && toks > 0 {
		bs = append(bs, replicas.Bucket{Name: replicas.ClientTokenScope(c.Name), PerMinute: c.TPM, Burst: c.TPM, Cost: toks})
	}
	return bs
}

// awaitShared is await on the replicas' buckets for a call of c on route r estimated at n
// tokens. decided is false when there are none (one replica), or the shared state could
// not decide: the local buckets decide then.
func (cr *clientRates) awaitShared(ctx context.Context, c llm.Client, r *route, n int) (charge keyCharge, decided bool, err error) {
	if cr.shared == nil {
		return keyCharge{}, false, nil
	}
	bs := clientBuckets(c, 1, n)
	start := cr.now()
	for {
		busy, err := cr.take(ctx, bs)
		waited := cr.now().Sub(start)
		switch {
		case err != nil:
			return keyCharge{}, true, err
		case busy == nil:
			return keyCharge{wait: waited, tokens: n, shared: bs}, true, nil
		case busy.Bucket == "":
			return keyCharge{}, false, nil
		case waited+busy.Wait > r.queueTimeout:
			return keyCharge{}, true, &llm.Error{Kind: llm.KindClientRateLimited, RetryAfter: busy.Wait,
				Message: fmt.Sprintf("client key %q has used its rate_limit (%s), shared by the replicas; its next call fits in %s, past %s's queue_timeout (%s)",
					c.Name, limitNamed(c, busy.Bucket), busy.Wait.Round(time.Millisecond), r.provider, r.queueTimeout)}
		}
		if err := cr.sleep(ctx, busy.Wait); err != nil {
			return keyCharge{}, true, err
		}
	}
}

// take charges bs in the replicas' shared buckets: nil, nil when it did; the Busy that says
// what had no tokens (or that nothing was decided) when it did not; ctx's error.
func (cr *clientRates) take(ctx context.Context, bs []replicas.Bucket) (*replicas.Busy, error) {
	ls, err := cr.shared.Acquire(ctx, []replicas.Claim{{Buckets: bs}})
	var busy *replicas.Busy
	switch {
	case err == nil:
		ls[0].Release() // it holds no scope: nothing to give back
		return nil, nil
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.As(err, &busy):
		return busy, nil
	}
	return &replicas.Busy{Err: err}, nil // the shared state refused the claim: decided locally
}

// sleep waits d, or less when ctx ends (its error) or the gateway stops (draining).
func (cr *clientRates) sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-cr.stopped:
		return &llm.Error{Kind: llm.KindDraining, Message: "the gateway is shutting down"}
	}
}

// limitNamed says which of c's limits bucket is, with its value.
func limitNamed(c llm.Client, bucket string) string {
	if strings.HasPrefix(bucket, "tpm/") {
		return fmt.Sprintf("tpm %d", c.TPM)
	}
	return fmt.Sprintf("rpm %d", c.RPM)
}

// reserveBatchShared is reserveBatch on the replicas' buckets: every member's request and
// tokens at once or none, waiting for nothing. decided as awaitShared's.
func (cr *clientRates) reserveBatchShared(c llm.Client, members []*call) (refund func(), decided bool, err error) {
	if cr.shared == nil {
		return nil, false, nil
	}
	toks := 0
	for _, m := range members {
		if c.TPM > 0 {
			m.keyTokens = keyEstimate(&m.route, m.req)
		}
		toks += m.keyTokens
	}
	bs := clientBuckets(c, len(members), toks)
	ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
	defer cancel()
	busy, err := cr.take(ctx, bs)
	switch {
	case err != nil || busy != nil && busy.Bucket == "":
		return nil, false, nil
	case busy != nil:
		return nil, true, &llm.Error{Kind: llm.KindClientRateLimited, RetryAfter: busy.Wait,
			Message: fmt.Sprintf("client key %q has used its rate_limit (%s), shared by the replicas: the batch's %d members fit in %s",
				c.Name, limitNamed(c, busy.Bucket), len(members), busy.Wait.Round(time.Millisecond))}
	}
	return func() { cr.adjustShared(bs, -1) }, true, nil
}

// correctShared replaces the estimate a call of c was charged in its key's shared tpm
// bucket by the tokens it used.
func (cr *clientRates) correctShared(c llm.Client, charged, used int) {
	if used == charged {
		return
	}
	b := replicas.Bucket{Name: replicas.ClientTokenScope(c.Name), PerMinute: c.TPM, Burst: c.TPM, Cost: used - charged}
	cr.adjustShared([]replicas.Bucket{b}, 1)
}

// adjustShared adds sign × each bucket's cost to the shared buckets, off the caller's
// goroutine: a refund (-1) or a correction (1).
func (cr *clientRates) adjustShared(bs []replicas.Bucket, sign int) {
	sh, log := cr.shared, cr.log
	go func() { // exits after at most len(bs) round trips, bounded by sharedTimeout together
		ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
		defer cancel()
		for _, b := range bs {
			if err := sh.Adjust(ctx, b, sign*b.Cost); err != nil {
				log.Debug().Err(err).Str("bucket", b.Name).Msg("client key's shared bucket not adjusted: the replicas' shared state did not take it")
				return
			}
		}
	}()
}
