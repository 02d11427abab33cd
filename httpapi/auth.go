package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// keySet holds the keys a route accepts as SHA-256 digests. Comparing digests makes every
// comparison the same length, so its time says nothing about a key's length (comparing the
// keys themselves returns at once when the lengths differ), and match compares against
// every key, so its time does not say which one matched either.
type keySet struct {
	digests [][sha256.Size]byte
}

// newKeySet keeps the non-empty keys: an empty one matches nothing (config validation
// refuses them anyway), so keys of only empty strings admit no one.
func newKeySet(keys []string) keySet {
	var ks keySet
	for _, k := range keys {
		if k != "" {
			ks.digests = append(ks.digests, sha256.Sum256([]byte(k)))
		}
	}
	return ks
}

// match reports whether got is one of the keys, in time that depends only on how many keys
// there are.
func (ks keySet) match(got string) bool {
	d := sha256.Sum256([]byte(got))
	found := 0
	for i := range ks.digests {
		found |= subtle.ConstantTimeCompare(d[:], ks.digests[i][:])
	}
	return found == 1
}

// presentedKey returns the key a request presents: the credentials of an Authorization
// header whose scheme is Bearer, matched without regard to case as RFC 9110 §11.1 says
// ("bearer" and "BEARER" too), else the x-api-key header (Anthropic's clients).
func presentedKey(r *http.Request) string {
	scheme, token, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if ok && strings.EqualFold(scheme, "Bearer") {
		return strings.TrimSpace(token)
	}
	return r.Header.Get("x-api-key")
}
