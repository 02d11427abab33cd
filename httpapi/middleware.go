package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"

	"github.com/julienschmidt/httprouter"
)

type ctxKey int

const requestIDKey ctxKey = iota

// requestID returns the request's id as set by withRequestID.
func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

// withRequestID echoes a sane client X-Request-Id or generates one, on the request's
// context and on the response.
func (s *Server) withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if !saneID(id) {
			id = newID()
		}
		w.Header().Set("X-Request-Id", id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDKey, id)))
	})
}

func saneID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c > '~' {
			return false
		}
	}
	return true
}

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// auth admits a request that presents one of keys (see presentedKey); with no keys
// everything is admitted.
func (s *Server) auth(keys []string, next httprouter.Handle) httprouter.Handle {
	return s.authAs(keys, failOpenAI, next)
}

// authAs is auth answering a refusal with fail, in the shape of the route's API.
func (s *Server) authAs(keys []string, fail func(http.ResponseWriter, apiError), next httprouter.Handle) httprouter.Handle {
	if len(keys) == 0 {
		return next
	}
	ks := newKeySet(keys)
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		if ks.match(presentedKey(r)) {
			next(w, r, ps)
			return
		}
		refuseKey(w, r, fail)
	}
}

// queueHeader gives every chat answer an X-Gateway-Queue-Ms (SPEC §3), also those refused
// before the chat handler runs (auth); the handler replaces it with the real wait.
func queueHeader(next httprouter.Handle) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		w.Header().Set("X-Gateway-Queue-Ms", "0")
		next(w, r, ps)
	}
}
