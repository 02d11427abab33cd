package actors

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/actors/policy/tokens"
	"github.com/tollgate/tollgate/actors/replicas"
	"github.com/tollgate/tollgate/providers/llm"
)

// clientRates holds each client key's own rate_limit (SPEC §18), gateway-wide: the buckets
// are tokens.PerKey's, shared by every provider the key's calls go to; with several
// replicas, the replicas' shared buckets instead (clientshared.go).
type clientRates struct {
	now     func() time.Time
	stopped <-chan struct{} // the gateway's: closed once its actors have stopped
	shared  replicas.Shared // nil: one replica
	log     zerolog.Logger
	mu      sync.Mutex
	keys    tokens.PerKey
}

// keyCharge is what a call reserved of its key's buckets: how long it waited for them and
// the tokens it was charged (its estimate, corrected from its usage once it ran).
type keyCharge struct {
	wait   time.Duration
	tokens int
	// shared are the replicas' buckets it was charged, when they decided (clientshared.go).
	shared []replicas.Bucket
}

// await reserves, for a call of client c on route r, one request and its
// estimated tokens from c's own buckets, and waits until they are there. The wait counts
// against r's queue_timeout, as if the call had waited in r's queue: a call that would wait
// past it is answered client_rate_limited with the wait as its Retry-After, and charged
// nothing. A client that leaves or a gateway that stops while the call waits gets its
// tokens back. A client without a rate_limit passes without a lock.
func (cr *clientRates) await(ctx context.Context, c llm.Client, r *route, req *llm.Request) (keyCharge, error) {
	rate := tokens.Rate{RPM: c.RPM, TPM: c.TPM}
	if !rate.Limited() {
		return keyCharge{}, nil
	}
	n := 0
	if rate.TPM > 0 {
		n = keyEstimate(r, req)
	}
	if charge, decided, err := cr.awaitShared(ctx, c, r, n); decided {
		return charge, err
	}
	now := cr.now()
	cr.mu.Lock()
	wait, dim, ok := cr.keys.Reserve(c.Name, rate, n, r.queueTimeout, now)
	cr.mu.Unlock()
	if !ok {
		return keyCharge{}, &llm.Error{Kind: llm.KindClientRateLimited, RetryAfter: wait,
			Message: fmt.Sprintf("client key %q has used its rate_limit (%s %d); its next call fits in %s, past %s's queue_timeout (%s)",
				c.Name, dim, limitOf(rate, dim), wait.Round(time.Millisecond), r.provider, r.queueTimeout)}
	}
	charge := keyCharge{wait: wait, tokens: n}
	if wait == 0 {
		return charge, nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return charge, nil
	case <-ctx.Done():
		cr.refund(c, charge)
		return keyCharge{}, ctx.Err()
	case <-cr.stopped:
		cr.refund(c, charge)
		return keyCharge{}, &llm.Error{Kind: llm.KindDraining, Message: "the gateway is shutting down"}
	}
}

// keyEstimate is a call's estimated tokens, what every tpm bucket is charged: its prompt
// plus its output cap, at most the model's window (an embedding's inputs alone). estimate
// skips it when no bucket of the provider counts tokens; a key's tpm bucket always does.
func keyEstimate(r *route, req *llm.Request) int {
	if req.Embed != nil {
		return llm.EstimatePromptTokens(req)
	}
	return tokens.Estimate(llm.EstimatePromptTokens(req), req.OutputLimit(), r.window)
}

// limitOf is rate's limit of dimension dim.
func limitOf(rate tokens.Rate, dim tokens.Dimension) int {
	if dim == tokens.TPM {
		return rate.TPM
	}
	return rate.RPM
}

// refund gives back what a call of c that never ran reserved.
func (cr *clientRates) refund(c llm.Client, k keyCharge) {
	if c.RPM <= 0 && c.TPM <= 0 {
		return
	}
	if k.shared != nil {
		cr.adjustShared(k.shared, -1)
		return
	}
	cr.mu.Lock()
	cr.keys.Refund(c.Name, k.tokens, cr.now())
	cr.mu.Unlock()
}

// correct replaces the estimate a call of c was charged in its key's tpm bucket
// by the tokens it used (0: the backend said nothing, and the estimate stands).
func (cr *clientRates) correct(c llm.Client, charged, used int) {
	if c.TPM <= 0 || used <= 0 {
		return
	}
	if cr.shared != nil {
		cr.correctShared(c, charged, used)
		return
	}
	cr.mu.Lock()
	cr.keys.Correct(c.Name, charged, used, cr.now())
	cr.mu.Unlock()
}

// reserveBatch reserves each member's request and tokens from the batch's client's own
// buckets, all at once or none: a batch starts with every member or not at all, so it waits
// for nothing, and is answered client_rate_limited with the wait as its Retry-After. refund
// gives them back if the batch does not start after all.
func (cr *clientRates) reserveBatch(c llm.Client, members []*call) (refund func(), err error) {
	rate := tokens.Rate{RPM: c.RPM, TPM: c.TPM}
	if !rate.Limited() {
		return func() {}, nil
	}
	if refund, decided, err := cr.reserveBatchShared(c, members); decided {
		return refund, err
	}
	now := cr.now()
	cr.mu.Lock()
	defer cr.mu.Unlock()
	giveBack := func(n int) {
		for _, m := range members[:n] {
			cr.keys.Refund(c.Name, m.keyTokens, now)
		}
	}
	for i, m := range members {
		if rate.TPM > 0 {
			m.keyTokens = keyEstimate(&m.route, m.req)
		}
		if wait, dim, ok := cr.keys.Reserve(c.Name, rate, m.keyTokens, 0, now); !ok {
			giveBack(i)
			return nil, &llm.Error{Kind: llm.KindClientRateLimited, RetryAfter: wait,
				Message: fmt.Sprintf("client key %q has used its rate_limit (%s %d): the batch's %d members fit in %s",
					c.Name, dim, limitOf(rate, dim), len(members), wait.Round(time.Millisecond))}
		}
	}
	return func() {
		cr.mu.Lock()
		defer cr.mu.Unlock()
		giveBack(len(members))
	}, nil
}

// forget drops a revoked key's buckets.
func (cr *clientRates) forget(name string) {
	cr.mu.Lock()
	cr.keys.Forget(name)
	cr.mu.Unlock()
}
