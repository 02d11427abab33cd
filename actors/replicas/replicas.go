// Package replicas is the contract between the actors and the state several replicas share
// (SPEC §17): the interface the gateway drives (Shared), what a call claims of it (Claim:
// Scopes and Buckets), its answer when there is no room (Busy), the cluster's health as
// /admin/state shows it (Health), the conversations' bindings (Binding), and the names of
// the scopes, buckets, cooldowns and bindings, as every replica must spell them. The actors
// use it; cmd/internal/cluster implements it on Redis. It imports the standard library
// only, so either side can import it without importing the other.
package replicas

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Shared is the replicas' shared state. Its methods are called off the actors' goroutines.
type Shared interface {
	// Acquire takes every claim's scopes and buckets, all claims or none, in one atomic
	// step: one claim per call, a batch's members together. It answers *Busy when
	// something has no room (nothing was taken), or ctx's error when ctx ends first.
	Acquire(ctx context.Context, claims []Claim) ([]Lease, error)
	// Health is this replica's view of the cluster now; it never waits for Redis.
	Health() Health
	// Occupancy is, per scope, how many calls each replica runs in it, cluster-wide.
	Occupancy(ctx context.Context, scopes []string) (map[string]map[string]int, error)
	// Cool makes the shared cooldown name (KeyScope, BreakerScope) last at least d from
	// now, never shorter, tells every other replica, and returns how long it has left. An
	// error (Redis away) leaves each replica to its own rule.
	Cool(ctx context.Context, name string, d time.Duration) (left time.Duration, err error)
	// Cooldowns is how long each of names still cools; a name absent is not cooling.
	Cooldowns(ctx context.Context, names []string) (map[string]time.Duration, error)
	// Adjust corrects an earlier charge of bucket b by delta tokens: a tpm estimate
	// replaced by the usage, or a retry's request counted (b.Cost is ignored).
	Adjust(ctx context.Context, b Bucket, delta int) error
	// Learn records that scope (ProviderScope, ModelScope) takes lanes lanes and tells every
	// other replica; Learned reads what is recorded. A value lower than the stored one
	// always replaces it; a higher one only while the stored value is still was (what this
	// replica last saw stored; 0: none). It returns the value stored after: lanes, or the
	// stored one that refused it.
	Learn(ctx context.Context, scope string, lanes, was int) (stored int, err error)
	Learned(ctx context.Context, scopes []string) (map[string]int, error)
	// Bound is the binding of the conversation named name (an AffinityScope) and how long
	// ago it was last bound; ok is false when it has none live under rule. One bounded
	// round trip; an error (Redis away) means nothing is known.
	Bound(ctx context.Context, name string, rule Affinity) (b Binding, age time.Duration, ok bool, err error)
	// Bind records each of bs (at most MaxBind) as bound now, under rule, in one bounded
	// round trip.
	Bind(ctx context.Context, bs []Binding, rule Affinity) error
	// Bindings is how many conversations are bound to each of providers, cluster-wide,
	// live under rule. One bounded round trip.
	Bindings(ctx context.Context, providers []string, rule Affinity) (map[string]int, error)
}

// Lease is one call's hold on its scopes, renewed while held.
type Lease interface {
	// Release gives the slots back cluster-wide. It is idempotent and bounded by one
	// round trip to the shared state.
	Release()
}

// Claim is what one call needs: a slot in every scope and its tokens in every bucket,
// taken all at once or not at all.
type Claim struct {
	Scopes  []Scope
	Buckets []Bucket
}

// Scope is one limit shared by the replicas: its name (GatewayScope, ProviderScope,
// ModelScope) and the configured (or learned) number of slots, at least 1. Replicas that
// pass different limits for one scope each enforce their own.
type Scope struct {
	Name  string
	Limit int
}

// Bucket is one shared rate limit (RateScope, TokenScope, KeyRateScope, KeyTokenScope):
// the rule of actors/policy/tokens, capacity Burst (0 meaning tokens.DefaultBurst; a
// charge above the capacity waits for a full bucket and leaves it in debt), charged Cost
// (0 charges nothing).
type Bucket struct {
	Name                   string
	PerMinute, Burst, Cost int
}

// Busy is Acquire's answer when the replicas have no room now: Scope is full, or Bucket
// lacks tokens for Wait; the call keeps its place in its queue and tries again on the next
// notice. With neither set the shared state could not decide (Redis did not answer, Err
// says why). Phase is the rule that refused (Health.Phase's names).
type Busy struct {
	Scope, Bucket string
	Wait          time.Duration
	Phase         string
	Err           error
}

func (b *Busy) Error() string {
	switch {
	case b.Scope != "":
		return "the replicas run " + b.Scope + " full"
	case b.Bucket != "":
		return fmt.Sprintf("the replicas' rate limit %s has no tokens for %s", b.Bucket, b.Wait)
	}
	return fmt.Sprintf("the replicas' shared state did not answer: %v", b.Err)
}

func (b *Busy) Unwrap() error { return b.Err }

// Binding is where a conversation was last served (session affinity, SPEC §19), as the
// replicas share it: Name is the conversation's AffinityScope, Key the key's index in the
// pool of Model's provider (replicas share a binding's key only if they list the
// provider's keys in the same order, as for KeyScope).
type Binding struct {
	Name     string
	Provider string
	Key      int
	Model    string // the served model's id, "provider/model"
}

// Affinity is the rule of the shared bindings: each is kept TTL after its last Bind, and
// at most Max are kept, the least recently bound going first.
type Affinity struct {
	TTL time.Duration
	Max int
}

// MaxBind is the most bindings one Bind carries.
const MaxBind = 1000

// Health is /admin/state's "cluster" object.
type Health struct {
	Replica       string `json:"replica"`
	ReplicasAlive int    `json:"replicas_alive"`
	// Redis is "ok" while the shared state answers, "down" while this replica runs on
	// its share of every limit.
	Redis string `json:"redis"`
	// Phase is the rule in force: shared, holding, settling, fallback or rejoining
	// (docs/architecture.md, "Without Redis").
	Phase string `json:"phase"`
	// LastHeartbeat is when a heartbeat last answered: this replica's view of what the
	// others hold, which the outage rule starts from, is as of then. Absent before the first.
	LastHeartbeat *time.Time `json:"last_heartbeat,omitempty"`
	// RunningCluster is what every replica runs (the max_running scope), and
	// RunningByReplica who runs it; both absent when the shared state did not answer.
	RunningCluster   *int           `json:"running_cluster,omitempty"`
	RunningByReplica map[string]int `json:"running_by_replica,omitempty"`
}

// GatewayScope is the scope of max_running.
const GatewayScope = "gateway"

// ProviderScope is the scope of provider p's lanes.
func ProviderScope(p string) string { return "provider/" + p }

// ModelScope is the scope of model m's model lanes on provider p.
func ModelScope(p, m string) string { return "model/" + p + "/" + m }

// RateScope is the bucket of provider p's rpm, TokenScope of its tpm.
func RateScope(p string) string { return "rpm/" + p }

// TokenScope: see RateScope.
func TokenScope(p string) string { return "tpm/" + p }

// KeyRateScope is the bucket of key key's rpm (key a KeyScope), KeyTokenScope of its tpm:
// the key's key_rate_limit, shared by the replicas.
func KeyRateScope(key string) string { return "rpm/" + key }

// KeyTokenScope: see KeyRateScope.
func KeyTokenScope(key string) string { return "tpm/" + key }

// BreakerScope is the shared cooldown that says provider p's circuit breaker is open.
func BreakerScope(p string) string { return "breaker/" + p }

// KeyScope is the shared cooldown of key k (its index in the configuration) of key pool pl
// (0: the provider's keys, then the models' own, in model order) of provider p. Replicas
// share a key's cooldown only if they list the provider's keys in the same order.
func KeyScope(p string, pl, k int) string { return fmt.Sprintf("key/%s/%d/%d", p, pl, k) }

// AffinityScope names conversation conv's shared binding: a digest of it, so that any
// client-chosen name (of any length or bytes) is a short printable name, and the shared
// state does not hold what the client wrote.
func AffinityScope(conv string) string {
	sum := sha256.Sum256([]byte(conv))
	return "affinity/" + hex.EncodeToString(sum[:16])
}

// Cooldown is what a shared cooldown's name says: provider Provider's breaker
// (BreakerScope), or key Key of its pool Pool (KeyScope).
type Cooldown struct {
	Provider  string
	Breaker   bool
	Pool, Key int
}

// ParseCooldown reads a name BreakerScope or KeyScope made; ok is false for any other.
func ParseCooldown(name string) (c Cooldown, ok bool) {
	if p, ok := strings.CutPrefix(name, "breaker/"); ok && p != "" {
		return Cooldown{Provider: p, Breaker: true}, true
	}
	rest, ok := strings.CutPrefix(name, "key/")
	parts := strings.Split(rest, "/")
	if !ok || len(parts) != 3 || parts[0] == "" {
		return Cooldown{}, false
	}
	pl, err1 := strconv.Atoi(parts[1])
	k, err2 := strconv.Atoi(parts[2])
	if err1 != nil || err2 != nil || pl < 0 || k < 0 {
		return Cooldown{}, false
	}
	return Cooldown{Provider: parts[0], Pool: pl, Key: k}, true
}
