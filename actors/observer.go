package actors

// Observer is told of the actor layer's decisions that no single answer shows, for metrics:
// retries, fallbacks, the circuit breaker and learned lanes (SPEC §10, §11, §15). Calls come
// from inside the provider actors' Receive and, for FellBack, from Start in the caller's
// goroutine, so an implementation is safe for concurrent use, only counts and sets gauges,
// and never blocks.
// Labels come from the arguments: providers and model ids of the configuration, and reasons
// from a small fixed set, never a key, a request id or a prompt.
//
// It is taken as Options.Observer (nil: no one is told); the provider actors call it where
// each thing happens (health.go), Start its fallbacks (start.go), and the gateway's metrics
// (cmd/internal/telemetry) implement it.
type Observer interface {
	// Retried: one more backend attempt was made for a call of provider (SPEC §10).
	Retried(provider string)
	// FellBack: a call left model id from for its fallback model id to.
	FellBack(from, to string)
	// BreakerChanged: provider's circuit opened (open) or closed again.
	BreakerChanged(provider string, open bool)
	// LanesLearned: provider's effective lanes changed to lanes, for reason (SPEC §11: e.g.
	// "stated_limit", "rate_limited", "probe", "shared": another replica learned them). The lanes themselves are read from State.
	LanesLearned(provider string, lanes int, reason string)
	// KeySetAside: the backend refused one of provider's keys and it was set aside (SPEC
	// §10), for every model (scope "key") or for one model ("model"). A probe refused
	// again is not a new set-aside.
	KeySetAside(provider, scope string)
	// KeyRestored: a set-aside key (scope "key") or (key, model) pair ("model") of provider
	// is in use again, by its probe's success ("probe") or a reload ("reload").
	KeyRestored(provider, scope, by string)
}
