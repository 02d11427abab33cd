package llm

import "time"

// Served is how the gateway served, or refused, one call: the running stream and what the
// HTTP layer needs for its headers (X-Gateway-Model, X-Gateway-Attempts, X-Gateway-Queue-Ms)
// and its log line. Every field but Stream is meaningful with an error too.
type Served struct {
	// Stream is the running answer; nil when the call was refused or failed.
	Stream Stream
	// Model is the id ("provider/model") of the model that served the call, or that refused
	// it. After a route or a fallback it is not the id the client asked for. Empty when the
	// call was refused before a model was chosen (an unknown id).
	Model string
	// Provider is Model's provider; empty with Model.
	Provider string
	// Attempts counts the backend calls made: 1 when nothing was retried, 0 when the gateway
	// refused the call before calling a backend.
	Attempts int
	// QueueWait is how long the call waited for admission, over every model it tried.
	QueueWait time.Duration
	// Fallbacks lists the models tried before Model, in order; empty when the first one served.
	Fallbacks []string
	// Affinity is what the call's success did to its conversation's binding (SPEC §19):
	// "hit" (served on the key and model it was bound to), "moved" or "new"; "" when the
	// call named no conversation or did not succeed.
	Affinity string
}

// BatchMember is one model's part of a batch call (SPEC §5): how it was served, or why it
// failed; one member's failure does not stop the others.
type BatchMember struct {
	Served
	Err error
}
