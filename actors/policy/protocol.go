package policy

import (
	"time"

	"github.com/tollgate/tollgate/actors/policy/keys"
	"github.com/tollgate/tollgate/actors/policy/tokens"
	"github.com/tollgate/tollgate/providers/llm"
)

// ID identifies a request. The caller chooses ids; they must be unique among the requests
// a Provider currently knows (an id may be reused once its request is finished or gone).
type ID uint64

// Limits are the gateway-wide caps, the Dispatcher's to enforce. Zero MaxRunning lets
// nothing run; zero MaxAdmitted lets nothing wait.
type Limits struct {
	MaxRunning  int // requests running at once, across providers
	MaxAdmitted int // running + queued beyond which a request that cannot start is refused
}

// ProviderSpec is one provider's admission configuration. The policy takes numbers as
// given; defaults (SPEC §2) are the config package's business, so a zero here means zero:
// no lanes, no queue, or a queue timeout of nothing.
type ProviderSpec struct {
	Name         string
	Lanes        int           // requests running at once on the provider
	QueueLength  int           // requests waiting at most
	QueueTimeout time.Duration // how long one may wait
	Models       []ModelSpec
	// RPM, TPM and Burst are the provider's rate limit (rate_limit), token buckets a
	// request waits for (tokens.Limit): a zero RPM or TPM does not limit that dimension, a
	// zero Burst is max(1, RPM/6).
	RPM, TPM, Burst int
	// Keys are the provider's API keys, a pool per set: index 0 is the provider's own keys,
	// others belong to models with keys of their own (ModelSpec.Keys). Empty: one pool of
	// one key that is always ready, which is what a provider without keys has.
	Keys []KeyPool
	// Clients is the gateway's count of each client's running calls, shared by all its
	// providers, by which a client's MaxRunning holds gateway-wide; nil holds no client to a
	// cap of its own.
	Clients *Slots
	// Shares is the gateway's count of each client's service at max_running, shared with
	// its Dispatcher (SetShares): the provider's queue brings a client back from idle to the
	// virtual time in it, and the provider charges it for the starts it makes on standing
	// credit, which the dispatcher does not grant. Nil keeps none.
	Shares *Shares
}

// KeyPool is one set of keys: their health and each key's own rate limit.
type KeyPool struct {
	// Ring is the keys' health (cooldowns, keys set aside). It is the caller's: the facts
	// the backend stated, so a provider rebuilt after a crash is given the same ring. Nil is
	// a ring of one key with the default cooldowns.
	Ring *keys.Ring
	// Limit is every key's key_rate_limit; the zero Limit does not limit.
	Limit tokens.Limit
}

// ModelSpec is one model of a provider.
type ModelSpec struct {
	Name  string
	Lanes int // model_lanes: requests for this model running at once
	// Keys is the index, in ProviderSpec.Keys, of the pool this model's calls use: 0, the
	// provider's keys, unless the model has keys of its own.
	Keys int
}

// Arrival is a request entering a provider's queue. A new request needs only Model and
// Class; a request that was admitted before (re-queued after the backend refused it for
// capacity, come from another model as a fallback, or requeued after a crash) keeps its
// place.
type Arrival struct {
	Model int
	Class llm.Priority
	// Tokens is the request's estimated cost for the tpm buckets (tokens.Estimate); 0 when
	// no bucket counts tokens.
	Tokens int
	// Client is who the request is for: the class's starts are shared between clients by
	// their weights (SPEC §18). The zero value is the anonymous client.
	Client llm.Client
	// Arrived is the request's place in its FIFO: when it first arrived at the gateway.
	// Zero means now.
	Arrived time.Time
	// Deadline is when it expires if it is still queued; zero means now + QueueTimeout.
	Deadline time.Time
	// Confirmed says the dispatcher's verdict is not needed: the request was admitted
	// already (a capacity requeue, or one whose verdict had kept it before a crash).
	Confirmed bool
	// Reported says an unconfirmed request was offered to the dispatcher before (it is put
	// back after a crash): it awaits only its verdict, not an acknowledgement (see Ack).
	Reported bool
	// Bound is one more than the key, in its model's pool, that the request's conversation
	// is bound to (session affinity, SPEC §19); 0 when none. It is a preference: the key is
	// picked when it is ready and has room, else the ring's turn decides as for any
	// request. It never changes which request starts, only on which key.
	Bound int
}

// Outcome is what became of an arrival. The zero value is not an outcome.
type Outcome uint8

const (
	Started  Outcome = iota + 1 // runs now: the caller starts it
	Queued                      // waits; a later grant starts it, or expiry or cancellation ends it
	Rejected                    // refused with the returned kind; the policy has forgotten it
)

func (o Outcome) String() string {
	switch o {
	case Started:
		return "started"
	case Queued:
		return "queued"
	case Rejected:
		return "rejected"
	}
	return "invalid"
}

// The protocol between the two halves. A Provider reports an Offer to the Dispatcher
// whenever what it could start changes; the Dispatcher answers with Grants and with a
// verdict per arrival; a Provider that can no longer use a grant gives it back by counting
// it in its next Offer without having started anything for it. See doc.go.

// Offer is a provider's report to the dispatcher. It is a complete snapshot: a later offer
// supersedes every earlier one, so offers may be coalesced but never reordered.
type Offer struct {
	// Epoch is the provider's incarnation of the protocol. A provider that rebuilt its state
	// (after a crash, or when a rebuilt dispatcher asks) starts a new epoch, which voids
	// every grant of the old one still in flight.
	Epoch uint64
	// Sync is the dispatcher generation the provider last answered (see Dispatcher.Forget):
	// a dispatcher rebuilt after a crash ignores offers made for its predecessor, whose
	// grants it does not know of.
	Sync uint64
	// Seen counts the grants of this epoch the provider has handled, used or given back.
	Seen uint64
	// Seq numbers the provider's offers; an Ack names the offer it answers.
	Seq uint64
	// Running is the provider's requests started and not finished: their lanes are taken.
	Running int
	// Queued is the provider's requests waiting, those still awaiting a verdict included.
	Queued int
	// Kept is how many of them a verdict kept, and QueueLength how many it may keep: the
	// dispatcher decides queue_full with them, so that a burst of arrivals at several
	// providers is judged as the same arrivals one after the other would be.
	Kept, QueueLength int
	// Fresh counts the waiting requests the dispatcher has not acknowledged yet (normally
	// just the arrival that made the offer): it must Ack the offer after the grants the offer
	// causes, so that what those grants start needs no verdict.
	Fresh int
	// Pending lists, in arrival order, the acknowledged waiting requests that still await
	// the dispatcher's verdict. The slice belongs to the offer: the provider never changes it
	// after making the offer.
	Pending []ID
	// Avail[c] is how many requests of class c the provider would start now if it were
	// granted that many, after starting Avail of every higher class first: lanes, model
	// lanes and the rate limiter shared between classes are charged in class order, which
	// is the order in which the dispatcher grants.
	Avail [llm.NumPriorities]int
	// Heads says whom those starts serve: class by class, in the order the provider would
	// make them, runs of starts of one client, Avail[c] starts in all for class c; nil when
	// all serve the anonymous client. The dispatcher shares max_running between clients by
	// them (Shares). The slice belongs to the offer, as Pending does: the provider never
	// changes it after making the offer.
	Heads []Head
	// Room is how many more requests the provider could start at once beyond Avail's, by its
	// free (effective) lanes and its start cap: what standing credit could be of use to it
	// (see Credit).
	Room int
}

// Head is a run of N starts of class Class that a provider's offer would make for one
// client: its name, its share (weight, at least 1) by which each start is charged, and its cap.
type Head struct {
	Client string
	Share  int
	// MaxRunning is the client's max_running, gateway-wide (Slots); 0: no cap of its own. A
	// client at its cap holds the dispatcher back until the providers offer afresh.
	MaxRunning int
	Class      llm.Priority
	N          int
}

// Credit, from the dispatcher to provider Provider with its answer to offer Seq: the
// provider may start an arrival itself, without offering it, while it runs fewer than
// Ceiling requests and nothing waits in its queue. The dispatcher counts the provider as
// running Ceiling (or what it last reported, if more) until the provider offers again: every
// offer gives the credit back, and a credit for an offer older than the provider's last, or
// of another epoch, is void. So the global caps hold with the credit used or not, and the
// grant protocol runs only when something waits (see doc.go).
type Credit struct {
	Provider int
	Epoch    uint64
	Seq      uint64
	Ceiling  int
}

// Recall, from the dispatcher to provider Provider: give back the credit of offer Seq by
// offering again, because the dispatcher needs the provider's exact running count (a request
// waits for the global cap, a verdict may be overloaded, a batch needs its slots, the caps
// changed). A provider that has offered since has given it back already and ignores it.
type Recall struct {
	Provider int
	Epoch    uint64
	Seq      uint64
}

// Grant, from the dispatcher to provider Provider: start one request of class Class now.
// Epoch is the provider epoch of the offer the grant was computed from; Client is whom the
// dispatcher expects the start to serve (Offer.Heads), and charged it to.
type Grant struct {
	Provider int
	Epoch    uint64
	Class    llm.Priority
	Client   string
}

// Verdict, from the dispatcher to provider Provider, on its waiting request ID: whether it
// may wait. SPEC §2's rules in order, each counted without it: Overloaded when the gateway's
// running + queued had reached max_admitted, else QueueFull when the provider's queue
// already kept queue_length requests; else it is kept. Epoch is the provider epoch of the
// offer that listed the request: a provider rebuilt since gets the verdict again for its new
// epoch, and ignores this one.
type Verdict struct {
	Provider   int
	Epoch      uint64
	ID         ID
	Overloaded bool
	QueueFull  bool
}

// Ack, from the dispatcher to provider Provider, after the grants its offer Seq caused:
// the requests that offer reported fresh and that did not start now await a verdict.
type Ack struct {
	Provider int
	Epoch    uint64
	Seq      uint64
}

// removes reports whether the verdict takes its request out of the queue.
func (v Verdict) removes() bool { return v.Overloaded || v.QueueFull }
