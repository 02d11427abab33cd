package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/tollgate/tollgate/providers/llm"
)

// ClientKey is one entry of auth.api_keys (SPEC §18): a key clients present and the client
// it names, with that client's own limits. In YAML it is a string (just the key, named
// key-1, key-2, … by its position) or a mapping with the fields below. A zero limit means
// "no cap of its own"; the provider's and the gateway's still hold.
type ClientKey struct {
	// Name names the client in logs, metrics, the ledger and the admin API: letters, digits,
	// '.', '_' and '-'; omitted → key-N, N its position from 1. Unique across api_keys.
	Name string `yaml:"name"`
	// Key is the secret the client presents; required, unique across api_keys.
	Key string `yaml:"key"`
	// Weight is the client's share of contended lanes against other clients; omitted → 1;
	// must be at least 1.
	Weight int `yaml:"weight"`
	// MaxRunning caps the client's calls running at once, gateway-wide; MaxQueued its calls
	// waiting at once. 0 (omitted): no cap of its own.
	MaxRunning int `yaml:"max_running"`
	MaxQueued  int `yaml:"max_queued"`
	// RateLimit is the client's own request and token buckets per minute; nil: none.
	RateLimit *ClientRate `yaml:"rate_limit"`
	// Models, when set, are the only model ids the client may ask for: exact ids, or
	// patterns ending in '*' that match every id they are a prefix of ("local/*").
	Models []string `yaml:"models"`
	// MaxPriority is the highest class the client's calls get (interactive, normal,
	// background); a higher requested class is lowered to it. "": no limit.
	MaxPriority string `yaml:"max_priority"`
	// Budget caps the client's spend per calendar period; nil: no budget.
	Budget *Budget `yaml:"budget"`
}

// ClientRate is a client key's rate limit; 0 in a dimension means none there.
type ClientRate struct {
	RPM int `yaml:"rpm"`
	TPM int `yaml:"tpm"`
}

// Budget is a spend cap in US dollars per calendar period in UTC.
type Budget struct {
	USD    float64 `yaml:"usd"`
	Period string  `yaml:"period"` // day, week (from Monday) or month
}

// Periods are the budget periods, in order of length.
var Periods = []string{"day", "week", "month"}

// clientKeyFields is ClientKey without its UnmarshalYAML, to decode the mapping form.
type clientKeyFields ClientKey

// UnmarshalYAML reads a key string or a key mapping. The config walk has already reported
// unknown fields and wrong kinds with their lines.
func (k *ClientKey) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*k = ClientKey{Key: n.Value}
		return nil
	case yaml.MappingNode:
		var f clientKeyFields
		if err := n.Decode(&f); err != nil {
			return err
		}
		*k = ClientKey(f)
		return nil
	}
	return &yaml.TypeError{Errors: []string{"expected a key (a string) or a key object {name, key, weight, ...}, got a " + nodeKindName(n)}}
}

// String never shows the key.
func (k ClientKey) String() string { return "client key " + k.Name }

// GoString never shows the key.
func (k ClientKey) GoString() string { return k.String() }

// Priority returns MaxPriority as a class, and whether there is one.
func (k *ClientKey) Priority() (llm.Priority, bool) {
	if k.MaxPriority == "" {
		return 0, false
	}
	p, err := llm.ParsePriority(k.MaxPriority)
	return p, err == nil
}

// Price is a model's price in USD per million tokens. CachedInput omitted → Input (prompt
// tokens served from a cache cost what the others do).
type Price struct {
	Input       float64  `yaml:"input"`
	CachedInput *float64 `yaml:"cached_input"`
	Output      float64  `yaml:"output"`
}

// validatePrice checks a model's price.
func validatePrice(pr *Price, path string, p *problems) {
	if pr.Input < 0 {
		p.add(path+".input", "must be 0 or more, got %v", pr.Input)
	}
	if pr.CachedInput != nil && *pr.CachedInput < 0 {
		p.add(path+".cached_input", "must be 0 or more, got %v", *pr.CachedInput)
	}
	if pr.Output < 0 {
		p.add(path+".output", "must be 0 or more, got %v", pr.Output)
	}
}

// Store says where run-time client keys and the spend ledger are kept (SPEC §18): exactly
// one of SQLite (a file path) and Postgres (a DSN).
type Store struct {
	SQLite   string `yaml:"sqlite"`
	Postgres string `yaml:"postgres"`
}

// String never shows the DSN, which may hold a password.
func (s Store) String() string {
	if s.Postgres != "" {
		return "postgres"
	}
	return "sqlite " + s.SQLite
}

// GoString is String.
func (s Store) GoString() string { return s.String() }

// apiKeys returns the secrets of auth.api_keys.
func (a *Auth) apiKeys() []string {
	out := make([]string, len(a.APIKeys))
	for i := range a.APIKeys {
		out[i] = a.APIKeys[i].Key
	}
	return out
}

// defaultClientKeys names unnamed keys by position and gives them weight 1 unless a weight
// was written (an explicit 0 stays, for validation to refuse).
func defaultClientKeys(keys []ClientKey, omitted func(path string, zero bool) bool) {
	for i := range keys {
		k := &keys[i]
		if k.Name == "" {
			k.Name = fmt.Sprintf("key-%d", i+1)
		}
		if omitted(fmt.Sprintf("auth.api_keys[%d].weight", i), k.Weight == 0) {
			k.Weight = 1
		}
	}
}

// validateClientKeys checks auth.api_keys without ever quoting a key.
func validateClientKeys(keys []ClientKey, p *problems) {
	names := map[string]int{}
	secrets := map[string]int{}
	for i := range keys {
		k := &keys[i]
		path := fmt.Sprintf("auth.api_keys[%d]", i)
		keyPath := path + ".key"
		switch _, ok := p.lines[keyPath]; {
		case !ok && p.isObject(path, clientKeyType):
			p.add(keyPath, "required: the secret the client presents")
		case !ok:
			keyPath = path // the string form: the entry is the key
			fallthrough
		default:
			validateKey(k.Key, keyPath, p)
		}
		if j, dup := secrets[k.Key]; dup && k.Key != "" {
			p.add(keyPath, "the same key as auth.api_keys[%d]: each client needs its own key", j)
		}
		secrets[k.Key] = i
		if !validName(k.Name) || len(k.Name) > 64 {
			p.add(path+".name", "%q: a name has 1 to 64 letters, digits, '.', '_' and '-'", k.Name)
		} else if j, dup := names[k.Name]; dup {
			p.add(path+".name", "%q is also the name of auth.api_keys[%d]", k.Name, j)
		}
		names[k.Name] = i
		validateClientLimits(k, path, p)
	}
}

// validateClientLimits checks one key's limits.
func validateClientLimits(k *ClientKey, path string, p *problems) {
	if k.Weight < 1 {
		p.add(path+".weight", "must be at least 1, got %d", k.Weight)
	}
	nonNegative(k.MaxRunning, path+".max_running", p)
	nonNegative(k.MaxQueued, path+".max_queued", p)
	if r := k.RateLimit; r != nil {
		nonNegative(r.RPM, path+".rate_limit.rpm", p)
		nonNegative(r.TPM, path+".rate_limit.tpm", p)
		if r.RPM == 0 && r.TPM == 0 {
			p.add(path+".rate_limit", "set rpm, tpm or both (or remove rate_limit)")
		}
	}
	for j, m := range k.Models {
		if msg := ModelPatternProblem(m); msg != "" {
			p.add(fmt.Sprintf("%s.models[%d]", path, j), "%s", msg)
		}
	}
	if _, ok := k.Priority(); k.MaxPriority != "" && !ok {
		p.add(path+".max_priority", "%q: want interactive, normal or background", k.MaxPriority)
	}
	if k.Budget != nil {
		if msg := BudgetProblem(k.Budget.USD, k.Budget.Period); msg != "" {
			field := ".budget.period"
			if k.Budget.USD <= 0 {
				field = ".budget.usd"
			}
			p.add(path+field, "%s", msg)
		}
	}
}

// ModelPatternProblem says what is wrong with an entry of a key's models list, or "".
func ModelPatternProblem(m string) string {
	switch {
	case m == "":
		return "empty model pattern"
	case strings.ContainsAny(m, " \t"):
		return fmt.Sprintf("%q: a model id or pattern has no spaces", m)
	case strings.Contains(strings.TrimSuffix(m, "*"), "*"):
		return fmt.Sprintf("%q: '*' may only end a pattern", m)
	}
	return ""
}

// BudgetProblem says what is wrong with a budget, or "".
func BudgetProblem(usd float64, period string) string {
	switch {
	case usd <= 0 || usd != usd:
		return fmt.Sprintf("usd must be more than 0, got %v", usd)
	case period == "":
		return "a budget needs a period: day, week or month"
	case !slices.Contains(Periods, period):
		return fmt.Sprintf("period %q: want day, week or month", period)
	}
	return ""
}

// isObject reports whether the YAML at path was a mapping of type t's fields: one of them
// has a line.
func (p *problems) isObject(path string, t reflect.Type) bool {
	for _, f := range fieldNames(t) {
		if _, ok := p.lines[path+"."+f]; ok {
			return true
		}
	}
	return false
}

func nonNegative(v int, path string, p *problems) {
	if v < 0 {
		p.add(path, "must be 0 (no cap) or more, got %d", v)
	}
}

// validateStore checks the store section.
func validateStore(s *Store, p *problems) {
	switch {
	case s.SQLite != "" && s.Postgres != "":
		p.add("store", "set sqlite or postgres, not both")
	case s.SQLite == "" && s.Postgres == "":
		p.add("store", "set sqlite: PATH or postgres: DSN (or remove store for the default SQLite file)")
	case s.Postgres != "" && !strings.HasPrefix(s.Postgres, "postgres://") && !strings.HasPrefix(s.Postgres, "postgresql://") && !strings.Contains(s.Postgres, "="):
		p.add("store.postgres", "want a DSN such as postgres://user:pass@host:5432/db or host=... dbname=...")
	}
}
