package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/tollgate/tollgate/providers/llm"
)

// ClientKey is a key clients present and the client it names (SPEC §18), with the limits the
// HTTP layer applies itself: which models it may ask for and the highest class it gets. The
// caps the gateway applies (weight, max_running, max_queued, rpm, tpm) travel in Client.
type ClientKey struct {
	Secret string
	Client llm.Client
	// Models are the model ids (or patterns ending in '*') the client may ask for; empty:
	// every model.
	Models []string
	// MaxPriority is the highest class the client's calls get, when LimitPriority.
	MaxPriority   llm.Priority
	LimitPriority bool
}

// KeyResolver finds the run-time client key (SPEC §18, created through the admin API) whose
// secret has the SHA-256 digest given; config keys are Options.Clients. Implementations
// look the digest up, never the secret, so their timing says nothing about a secret.
type KeyResolver interface {
	ResolveDigest(ctx context.Context, digest [sha256.Size]byte) (ClientKey, bool)
	// Any reports whether a run-time key has ever been created: from then on the API asks
	// for a key even when the config lists none.
	Any() bool
}

// clientRing holds the config's client keys by the SHA-256 digests of their secrets.
type clientRing struct {
	digests [][sha256.Size]byte
	keys    []ClientKey
}

// newClientRing keeps the keys with a non-empty secret, without their secrets.
func newClientRing(keys []ClientKey) clientRing {
	var cr clientRing
	for _, k := range keys {
		if k.Secret == "" {
			continue
		}
		cr.digests = append(cr.digests, sha256.Sum256([]byte(k.Secret)))
		k.Secret = ""
		cr.keys = append(cr.keys, k)
	}
	return cr
}

// match returns the key whose digest is d, comparing against every key so that the time
// taken depends only on how many keys there are.
func (cr *clientRing) match(d [sha256.Size]byte) (ClientKey, bool) {
	found := -1
	for i := range cr.digests {
		if subtle.ConstantTimeCompare(d[:], cr.digests[i][:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return ClientKey{}, false
	}
	return cr.keys[found], true
}

// clientsFromKeys names plain API keys key-1, key-2, … by position, as config does.
func clientsFromKeys(keys []string) []ClientKey {
	out := make([]ClientKey, len(keys))
	for i, k := range keys {
		out[i] = ClientKey{Secret: k, Client: llm.Client{Name: fmt.Sprintf("key-%d", i+1), Weight: 1}}
	}
	return out
}

type clientKeyCtx struct{}

// withClientKey returns ctx carrying key k and, for the gateway, its llm.Client.
func withClientKey(ctx context.Context, k ClientKey) context.Context {
	return llm.WithClient(context.WithValue(ctx, clientKeyCtx{}, k), k.Client)
}

// clientKeyOf returns the key a request presented; the zero ClientKey (the anonymous
// client) when auth is off.
func clientKeyOf(ctx context.Context) ClientKey {
	k, _ := ctx.Value(clientKeyCtx{}).(ClientKey)
	return k
}

// keysOn reports whether the API asks for a client key.
func (s *Server) keysOn() bool {
	return len(s.clients.keys) > 0 || s.opts.Keys != nil && s.opts.Keys.Any()
}

// resolve returns the client key a request presents: a config key or a run-time one.
func (s *Server) resolve(r *http.Request) (ClientKey, bool) {
	d := sha256.Sum256([]byte(presentedKey(r)))
	if k, ok := s.clients.match(d); ok {
		return k, true
	}
	if s.opts.Keys != nil {
		return s.opts.Keys.ResolveDigest(r.Context(), d)
	}
	return ClientKey{}, false
}

// clientAuth admits a request that presents a client key, with the key's client on its
// context; with no client keys everything is admitted as the anonymous client.
func (s *Server) clientAuth(fail func(http.ResponseWriter, apiError), next httprouter.Handle) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		if !s.keysOn() {
			next(w, r, ps)
			return
		}
		if k, ok := s.resolve(r); ok {
			if s.opts.Tenants != nil {
				s.opts.Tenants.Used(k.Client.Name, s.opts.Now())
			}
			next(w, r.WithContext(withClientKey(r.Context(), k)), ps)
			return
		}
		refuseKey(w, r, fail)
	}
}

// refuseKey answers 401 invalid_api_key in the route's shape.
func refuseKey(w http.ResponseWriter, r *http.Request, fail func(http.ResponseWriter, apiError)) {
	msg := "missing API key: send Authorization: Bearer <key> or x-api-key: <key>"
	if presentedKey(r) != "" {
		msg = "the API key is not valid for this gateway"
	}
	// x-should-retry: a wrong key stays wrong (SPEC §4); Claude Code otherwise retries it.
	fail(w, apiError{status: http.StatusUnauthorized, code: "invalid_api_key", typ: "authentication_error",
		message: msg, noRetry: true})
}

// clientGate applies a client key's own entry rules to a call for models at class prio
// (SPEC §18): the key's model allowlist (403 model_not_allowed), its budget (402
// budget_exceeded) and its highest class (a higher one is lowered, and the log line says
// so). It returns the class the call gets.
func (s *Server) clientGate(ctx context.Context, rec *record, models []string, prio llm.Priority) (llm.Priority, *apiError) {
	k := clientKeyOf(ctx)
	rec.client = k.Client.Name
	if k.Client.Name == "" {
		return prio, nil
	}
	for _, m := range models {
		if !allowedModel(k.Models, m) {
			return prio, &apiError{status: http.StatusForbidden, code: "model_not_allowed", typ: "permission_error", param: "model",
				message: fmt.Sprintf("client key %s may not use model %s (its models: %s)", k.Client.Name, m, strings.Join(k.Models, ", ")), noRetry: true}
		}
	}
	if t := s.opts.Tenants; t != nil {
		now := s.opts.Now()
		if spent, budget, resets := t.Spend(k.Client.Name, now); budget > 0 && spent >= budget {
			return prio, &apiError{status: http.StatusPaymentRequired, code: "budget_exceeded", typ: "insufficient_quota", noRetry: true,
				message: fmt.Sprintf("client key %s has spent $%.4f of its $%.2f budget; the period resets at %s",
					k.Client.Name, spent, budget, resets.UTC().Format(time.RFC3339))}
		}
	}
	if k.LimitPriority && prio < k.MaxPriority {
		rec.asked, rec.lowered = prio, true
		prio = k.MaxPriority
	}
	return prio, nil
}

// allowedModel reports whether model is one of patterns (exact, or a prefix ending in '*');
// no patterns allow every model.
func allowedModel(patterns []string, model string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		if p == model || strings.HasSuffix(p, "*") && strings.HasPrefix(model, strings.TrimSuffix(p, "*")) {
			return true
		}
	}
	return false
}

// account puts a finished call in the ledger (when there is one) and notes its cost for the
// log line.
func (s *Server) account(r *record, status int) {
	if s.opts.Tenants == nil {
		return
	}
	now := s.opts.Now()
	r.cost = s.opts.Tenants.Record(LedgerEntry{At: now, RequestID: r.id, Key: r.client, Route: r.route,
		Provider: r.provider, Model: r.model, ServedModel: r.servedBy, Usage: r.usage, Status: status, Code: r.code,
		Attempts: r.attempts, QueueMs: r.queue.Milliseconds(), RunMs: max(0, now.Sub(r.start)-r.queue).Milliseconds()})
}
