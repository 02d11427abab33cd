package replicas

// The names of a client key's limits shared by the replicas (SPEC §18, "Several
// replicas"). Each is spelled with the key's name, never its secret: names are Redis keys,
// seen by whoever reads Redis, and the same on every replica.

// ClientScope is the scope of client key name's max_running.
func ClientScope(name string) string { return "client/" + name }

// Uncapped is the limit a claim passes for a scope that counts it but must never refuse
// it: a batch's members in their key's ClientScope (a batch is admitted whole, past its
// key's cap), so that the other replicas count them against the cap.
const Uncapped = 1 << 30

// ClientRateScope is the bucket of client key name's rpm, ClientTokenScope of its tpm.
// They never meet a provider's names: a provider's are "rpm/" and its name, which has no
// "/"; a provider key's are "rpm/key/…".
func ClientRateScope(name string) string { return "rpm/client/" + name }

// ClientTokenScope: see ClientRateScope.
func ClientTokenScope(name string) string { return "tpm/client/" + name }
