package app

import (
	"github.com/tollgate/tollgate/cmd/internal/config"
	"github.com/tollgate/tollgate/httpapi"
	"github.com/tollgate/tollgate/providers/llm"
)

// clientKeys turns the config's auth.api_keys into the HTTP layer's client keys.
func clientKeys(keys []config.ClientKey) []httpapi.ClientKey {
	out := make([]httpapi.ClientKey, len(keys))
	for i := range keys {
		out[i] = clientKey(&keys[i])
	}
	return out
}

// clientKey is one config key as the HTTP layer holds it.
func clientKey(k *config.ClientKey) httpapi.ClientKey {
	c := llm.Client{Name: k.Name, Weight: k.Weight, MaxRunning: k.MaxRunning, MaxQueued: k.MaxQueued}
	if k.RateLimit != nil {
		c.RPM, c.TPM = k.RateLimit.RPM, k.RateLimit.TPM
	}
	ck := httpapi.ClientKey{Secret: k.Key, Client: c, Models: k.Models}
	ck.MaxPriority, ck.LimitPriority = k.Priority()
	return ck
}
