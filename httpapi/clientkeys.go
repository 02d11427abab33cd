package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"

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
