package actors

import (
	"github.com/tollgate/tollgate/actors/policy"
	"github.com/tollgate/tollgate/actors/policy/keys"
)

// policySpec is the one mapping from what the gateway runs (Provider, its models now) to what
// admission needs (policy.ProviderSpec): the policy may not import the actors, so the two
// shapes meet here, and TestPolicySpecMapsEveryField holds this function to both. rings are
// the key pools' health (0: the provider's keys, then models' own), pool each model's pool
// (absent: 0), clients the gateway's running calls of each client and shares their service at
// max_running, both shared by all providers.
func policySpec(pv *Provider, models []Model, rings []*keys.Ring, pool map[int]int, clients *policy.Slots, shares *policy.Shares) policy.ProviderSpec {
	ps := policy.ProviderSpec{Name: pv.Name, Lanes: pv.Lanes, QueueLength: pv.QueueLength, Clients: clients, Shares: shares,
		QueueTimeout: pv.QueueTimeout, RPM: pv.RateLimit.RPM, TPM: pv.RateLimit.TPM, Burst: pv.RateLimit.Burst,
		Models: make([]policy.ModelSpec, len(models))}
	for _, ring := range rings {
		ps.Keys = append(ps.Keys, policy.KeyPool{Ring: ring, Limit: pv.KeyRateLimit})
	}
	for i, m := range models {
		ps.Models[i] = policy.ModelSpec{Name: m.Name, Lanes: m.Lanes, Keys: pool[i]}
	}
	return ps
}
