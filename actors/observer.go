package actors

// Observer is told of the actor layer's decisions that no single answer shows, for metrics:
// retries, fallbacks, the circuit breaker and learned lanes (SPEC §10, §11, §15). Calls come
// from inside Receive, so an implementation only counts and sets gauges, never blocks.
// Labels come from the arguments: providers and model ids of the configuration, and reasons
// from a small fixed set, never a key, a request id or a prompt.
//
// Nothing calls it yet: none of these exists before the resilience work. It is meant to be
// taken as Options.Observer (nil: no one is told) and called where each thing happens; the
// gateway's metrics (cmd/internal/telemetry) already implement it, and its series read 0
// until then.
type Observer interface {
	// Retried: one more backend attempt was made for a call of provider (SPEC §10).
	Retried(provider string)
	// FellBack: a call left model id from for its fallback model id to.
	FellBack(from, to string)
	// BreakerChanged: provider's circuit opened (open) or closed again.
	BreakerChanged(provider string, open bool)
	// LanesLearned: provider's effective lanes changed to lanes, for reason (SPEC §11: e.g.
	// "stated_limit", "rate_limited", "probe"). The lanes themselves are read from State.
	LanesLearned(provider string, lanes int, reason string)
}
