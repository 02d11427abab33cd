package upstream

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/tollgate/tollgate/providers/llm"
)

// KeyRing hands out a provider's API keys round-robin, one per call, with per-model
// overrides (NVIDIA, for one, issues a key per model). It is safe for concurrent use: the
// counters are shared by all goroutines, so concurrent calls spread over the keys.
type KeyRing struct {
	all      ring
	models   map[string]*ring
	anyModel *ring    // the keys of the alphabetically first model, for calls that name none
	secrets  []string // every key, for Redact
}

// ring is one list of keys and its turn counter.
type ring struct {
	keys []string
	next atomic.Uint64
}

// pick returns the next key, or "" when there are none.
func (r *ring) pick() string { return r.at(r.turn()) }

// turn takes the next index in the rotation; 0 when there are no keys.
func (r *ring) turn() int {
	if len(r.keys) == 0 {
		return 0
	}
	return int((r.next.Add(1) - 1) % uint64(len(r.keys)))
}

// at returns key i, or "" when there are none (i out of range wraps round: a caller's index
// from before a reload still names some key).
func (r *ring) at(i int) string {
	if len(r.keys) == 0 {
		return ""
	}
	return r.keys[(i%len(r.keys)+len(r.keys))%len(r.keys)]
}

// NewKeyRing returns a ring over keys, with modelKeys replacing keys for the models it lists
// (an empty list overrides nothing). The slices are copied. An empty key stands for "send no
// key" (a local server, or a proxy that adds its own).
func NewKeyRing(keys []string, modelKeys map[string][]string) *KeyRing {
	k := &KeyRing{all: ring{keys: append([]string(nil), keys...)}}
	k.secrets = append(k.secrets, keys...)
	first := ""
	for model, ks := range modelKeys {
		if len(ks) == 0 {
			continue
		}
		if k.models == nil {
			k.models = make(map[string]*ring, len(modelKeys))
		}
		r := &ring{keys: append([]string(nil), ks...)}
		k.models[model] = r
		k.secrets = append(k.secrets, ks...)
		if k.anyModel == nil || model < first {
			k.anyModel, first = r, model
		}
	}
	return k
}

// For returns the key for a call to the backend model, or "" for none.
func (k *KeyRing) For(model string) string { return k.ringFor(model).pick() }

// ringFor returns the keys a call to model uses.
func (k *KeyRing) ringFor(model string) *ring {
	if r, ok := k.models[model]; ok {
		return r
	}
	return &k.all
}

// Count is how many keys a call to model rotates over; at least 1 (no key counts as one,
// sending none).
func (k *KeyRing) Count(model string) int { return max(len(k.ringFor(model).keys), 1) }

// Turn takes the next key of model's rotation and returns its index and the key ("" for none).
func (k *KeyRing) Turn(model string) (int, string) {
	r := k.ringFor(model)
	i := r.turn()
	return i, r.at(i)
}

// At returns key i of model's keys ("" for none); an index out of range wraps round.
func (k *KeyRing) At(model string, i int) string { return k.ringFor(model).at(i) }

// ForListing returns the key for a call that names no model, such as listing models. A
// provider configured with per-model keys only borrows one of those: any valid key may list.
func (k *KeyRing) ForListing() string {
	if key := k.all.pick(); key != "" || k.anyModel == nil {
		return key
	}
	return k.anyModel.pick()
}

// Secrets returns every key the ring holds, for Redact. The caller must not change it.
func (k *KeyRing) Secrets() []string { return k.secrets }

// Opener is an adapter's call with a given key ("" sends none).
type Opener func(ctx context.Context, req *llm.Request, key string) (llm.Stream, error)

// OpenTurn makes the call with the next key of the request model's rotation (llm.Backend's
// Open), and records the key's index on its error.
func (k *KeyRing) OpenTurn(ctx context.Context, req *llm.Request, open Opener) (llm.Stream, error) {
	i, key := k.Turn(req.Model)
	s, err := open(ctx, req, key)
	return s, WithKey(err, i)
}

// OpenKey makes the call with key i of the request model's keys (llm.KeyedBackend's
// OpenWithKey), and records i on its error.
func (k *KeyRing) OpenKey(ctx context.Context, req *llm.Request, i int, open Opener) (llm.Stream, error) {
	s, err := open(ctx, req, k.At(req.Model, i))
	return s, WithKey(err, i)
}

// WithKey records on an *llm.Error that the call used key i, and returns err.
func WithKey(err error, i int) error {
	if e, ok := errors.AsType[*llm.Error](err); ok {
		e.Key = i
	}
	return err
}
