// Package policy is Tollgate's admission policy: lanes, bounded queues, global caps, rate
// limiters and the dispatch order of SPEC §2, as pure synchronous code in two halves that
// talk only through the values of protocol.go.
//
//   - A Provider is one provider's side: its bounded FIFO queues with their deadlines, its
//     lanes and model lanes, its limiters (rate limit, keys, start cap), and the choice of
//     which of its requests starts next. The provider actor owns one.
//   - The Dispatcher is the gateway's side: max_running, max_admitted, class priority across
//     providers, the clients' fair shares of max_running and, on a tie, the providers'
//     round-robin. The supervisor actor's core, a Supervisor (the dispatcher, its
//     generation, the drain), owns it and returns the effects of each event for the actor
//     to carry out.
//
// Neither half has goroutines, timers or a clock of its own: every method that depends on
// time takes now, and Provider.NextWake says when its owner should call back if nothing else
// happens. Each half is used from one goroutine; now must not go backwards between calls.
//
// # The grant protocol
//
//	client ──arrive──▶ Provider ──Offer (fresh, pending)──▶ Dispatcher
//	                      ▲                                   │
//	                      └──── Grants, Verdicts, Ack ────────┘
//
// A provider reports an Offer whenever what it could start changes: an arrival, a finish, a
// cancellation, an expiry, a new token, changed lanes, or a grant it could not use. The
// offer's Avail says, class by class, how many starts the provider would make if granted
// them, as SPEC §2 orders them within the provider and charging lanes, model lanes and
// tokens in class order; its Heads say whom those starts would serve, in order. The
// dispatcher keeps each provider's last offer, corrects it for the grants it has sent since
// (counted as running, taken from Avail and from the front of Heads), and grants starts
// exactly as a single global dispatcher would: while fewer than MaxRunning run, the highest
// class some provider can start, by the provider whose next start serves the client with the
// least service at max_running (Shares), on a tie the first such provider after the one that
// class was granted last. A provider handles a grant by starting the request of that class it would
// start now; when it cannot (the request was cancelled or expired while the grant was in
// flight, or a higher class now wants the lane), it starts nothing and its next offer counts
// the grant as seen, which gives the start back at once.
//
// Arrivals need one more answer. A request that does not start at once may wait only if the
// gateway's running + queued, counted without it, is below MaxAdmitted, and only if its
// provider's queue holds fewer than queue_length requests (SPEC §2 rules 1 and 2, in that
// order). The provider enqueues the newcomer at the tail of its FIFO (no barging: a grant
// starts the oldest eligible request, which is an older one when one waits for the same
// lanes) and reports it fresh with its offer. The dispatcher grants what that offer lets
// start and then acknowledges the offer (Ack); a fresh request that did not start now awaits
// a verdict, and the provider lists it as pending in its next offer. The dispatcher judges
// pending requests in ID order across providers (the gateway numbers requests as they
// arrive), each as at its arrival: overloaded if running plus the requests already kept have
// reached MaxAdmitted, else queue full if its provider's queue already keeps queue_length,
// else kept. Judging only after the grants is what makes a burst come out as the same
// arrivals one at a time would: what the grants start needs no verdict, and no request is
// counted against a cap by requests that arrived after it. A request that can start now
// therefore starts even when running+queued is at MaxAdmitted (which is then exceeded by at
// most MaxRunning), and one for an idle provider starts at once if the global cap has room:
// it takes nothing an eligible queued request needs, since the dispatcher would have granted
// that request the room first.
//
// When every message is handled before the next event, the two halves decide exactly what a
// single global dispatcher applying SPEC §2 decides; the property test checks that against
// a slow reference model. While messages are in flight the caps still hold at every instant
// (the dispatcher counts a grant as running before the provider sees it, the provider
// counts its own lanes), every request still gets exactly one outcome, and FIFO and class
// order hold within each provider; only the interleaving of concurrent events decides
// which of two equally entitled requests goes first.
//
// Standing credit (credit.go) lets an uncontended arrival skip the round trip: with nothing
// waiting, the dispatcher's answer to an offer may carry a Credit, a ceiling on what the
// provider runs that the dispatcher counts whole, on which the provider starts an arrival
// with its queue empty; the dispatcher recalls it whenever it needs the exact count.
//
// Epochs make the protocol survive a crash on either side. A provider rebuilt from its
// facts (see rebuild.go) starts a new epoch: grants of the old one are void, and its first
// offer of the new epoch tells the dispatcher to drop them. A dispatcher rebuilt after a
// crash forgets every provider (Forget) and grants nothing until each has reported afresh.
//
// # Batches
//
// A batch (SPEC §5) starts all its members at the same instant or none. The dispatcher holds
// its global slots (Hold), each provider concerned starts its members in one step or refuses
// (Provider.Reserve: free lanes, model lanes and a token for every member, and no waiting
// request of its own that could start, since a batch never passes a queue), and its offer
// then counts them, so the dispatcher gives back the provider's share of the hold (Unhold).
// If any provider refused, the others free their members (Provider.Release), with their
// tokens when the limiter took none since. A batch never waits and never causes a verdict.
// One bounded exception to "never passes a queue": a batch refused for lanes twice, the
// second time after its Retry-After (Reserve's retryAfter), has its lanes kept for it, and passes
// the waiting requests of its class and below, which meanwhile start only on lanes beyond
// it (batchhold.go).
//
// # Dispatch order
//
//  1. only eligible requests (provider lane, model lane, the limiters below, global cap);
//  2. highest class first (llm.Interactive, then Normal, then Background);
//  3. within a class, the provider whose next start serves the client with the least
//     service for its weight at the gateway's max_running (SPEC §18: Shares, fairgrants.go);
//     on a tie, providers take turns: the search starts at the provider after the one this
//     class was granted last. The cursor is per class, so background traffic keeps its own
//     rotation however busy the interactive class is;
//  4. within the provider, clients share the class's starts by weighted fair queuing (SPEC
//     §18): the client with the least service for its weight among those with an eligible
//     request; tie: the one whose request has waited longest (see queue);
//  5. within the client, the model with the fewest running requests among those with an
//     eligible request of the class; tie: the model whose oldest request of the class has
//     waited longest; tie again: the lower model index;
//  6. within a client, model and class, first come, first served.
//
// Without client keys every request is the anonymous client's: step 3 is SPEC §2's turns
// between providers, and steps 4 and 6 its first come, first served. Clients are shared
// fairly at both points where calls wait: each provider's queue, by their service there
// (step 4), and max_running, by their service at the whole gateway (step 3). Step 3 sees
// each provider's next start only: a client whose request waits behind another client's at
// its provider (step 4's order) waits for that start too. A client at its max_running
// gateway-wide (Slots) is skipped at step 4; at step 3 the dispatcher grants nothing past a
// provider whose next start would serve it, until the providers have offered afresh (the
// slots' change makes them), since that provider would start someone else whose share its
// offer does not show.
//
// A provider keeps its queues per client, model and class as intrusive FIFO lists over a
// slab of entries, with counts at every level, so one choice costs O(clients × models) and
// never walks a queue. A FIFO is ordered by arrival at the gateway: a request that comes back (requeued
// after a capacity refusal, or a fallback from another model) takes the place its first
// arrival gives it (Enter). A second list orders the queued requests by deadline for Expire
// and NextWake; a new request goes at the tail of both, so only a returning one walks.
//
// # Limiters
//
// Besides lanes, a provider's requests wait for its limiters; a request is never started to
// be refused (SPEC §2 rule 1, §10):
//
//   - its rate limit (rate_limit: rpm, tpm, burst), a tokens.Limiter: a start takes one
//     request and the request's estimated tokens (Arrival.Tokens), corrected later from what
//     the backend reported (Correct). The rpm bucket holds Burst starts (default
//     max(1, RPM/6): ten seconds' worth), the tpm bucket ten seconds of tokens;
//   - its keys (KeyPool): a start needs a key of its model's pool that is ready, neither
//     cooling after a rate limit nor set aside, and, with key_rate_limit, whose own bucket has
//     room. The rings are the caller's (Limiters.Keys); Grant picks the key in the ring's turn;
//   - a start cap (Lanes.SetStartCap): the circuit breaker lets nothing start while open and
//     one probe when half-open;
//   - effective lanes of the provider and of each model (Lanes.SetEffective,
//     Lanes.SetEffectiveModel), as learned from the backend.
//
// The Provider composes two parts that own their state: its Lanes (lanes.go: the lanes and
// model lanes, what runs on them, the start cap, the models the replicas block) and its
// Limiters (limiters.go and pools.go: the rate limiter, the key pools and their buckets, the
// pool each model draws from). The owner reaches them through Provider.Lanes and
// Provider.Limiters to set what it learned and to read them; the Provider's own methods are
// the queue, the protocol and the starts, which spend both.
//
// A limiter holds back everything behind the request it cannot serve, so a request needing
// many tokens is not starved by smaller ones: when the request SPEC §2 picks next finds no
// key in its pool, the rest of that pool waits (other pools' requests go on); when it finds
// the rate limiter short, the provider starts nothing more. Offers and grants simulate
// exactly that, charging each limiter in class order, and NextWake names the first moment a
// limiter that holds something back will have room for it. Buckets are kept as theoretical
// arrival times (tokens), so refills never drift. A retry (Retry) is charged like a start but
// not held back: it keeps the lane its call holds.
package policy
