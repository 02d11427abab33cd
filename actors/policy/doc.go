// Package policy is Tollgate's admission policy: lanes, bounded queues, global caps, rate
// limiters and the dispatch order of SPEC §2, as pure synchronous code.
//
// A Gate has no goroutines, timers or clock of its own: every method that depends on time
// takes now, and NextWake says when the owner should call back if nothing else happens. The
// owner (the supervisor actor) calls it from one goroutine; a Gate is not safe for
// concurrent use. now must not go backwards between calls.
//
// # Admission (Arrive)
//
// A request may start when its provider has a free lane (running < effective lanes), its
// model has a free model lane, the gateway runs fewer than MaxRunning requests, the
// provider's rate limiter has a token, and it does not barge: Arrive enqueues the newcomer
// at the tail of its FIFO and runs the dispatcher, and the newcomer starts only if the
// dispatcher picks it. A queued request that could start therefore always goes first when
// the two compete for the same lane or the same last global slot, while a newcomer for a
// different, idle provider starts at once if the global cap has room for it: it takes
// nothing an eligible queued request needs. That holds even for the last global slot while
// the queued requests wait for their own busy lanes: reserving the slot for them would
// idle the gateway for as long as those lanes stay busy, which may be minutes.
//
// If the newcomer does not start, the rejections apply in SPEC order, counted without it:
// running+queued ≥ MaxAdmitted is gateway_overloaded, a provider queue holding QueueLength
// is provider_queue_full; a rejected request leaves no trace. MaxAdmitted bounds what
// waits, as the SPEC orders it: a request that can start now starts even when running+queued
// is at MaxAdmitted (which is then exceeded by at most MaxRunning).
//
// Queued requests that became eligible since the owner's last Dispatch (normally only
// because a rate limiter refilled before the owner's wake-up fired) are started by Arrive's
// dispatcher run in their proper order. Arrive cannot report them, so it holds them: the
// next Dispatch returns them first, NextWake reports a time ≤ now while any are held, and
// Cancel of a held request undoes its start.
//
// # Dispatch order
//
//  1. only eligible requests (provider lane, model lane, rate limiter, global cap);
//  2. highest class first (llm.Interactive, then Normal, then Background);
//  3. within a class, providers take turns: the search starts at the provider after the
//     one this class served last. The cursor is per class, so background traffic keeps
//     its own rotation however busy the interactive class is;
//  4. within the provider, the model with the fewest running requests among those with an
//     eligible request of the class; tie: the model whose oldest request of the class has
//     waited longest; tie again: the lower model index;
//  5. within a model and class, first come, first served.
//
// Queues are kept per provider, model and class as intrusive FIFO lists over a slab of
// entries, with counts at every level, so one choice costs O(classes × (providers +
// models)) and never walks a queue. A provider has one queue timeout, so its arrival order
// is its deadline order: one arrival list per provider serves Expire and NextWake.
//
// # Rate limiter
//
// A provider with RPM > 0 has a token bucket refilled at RPM per minute holding at most
// Burst tokens (default max(1, RPM/6): ten seconds' worth), full at start. A token is
// taken when a request starts, not when it arrives. Over any minute at most RPM+Burst
// requests start; backends that enforce per-minute limits over shorter windows tolerate a
// burst of a few, and a smaller Burst is the knob for those that do not. It is kept as a
// theoretical arrival time (GCRA), in integer nanoseconds, so refills never drift.
package policy
