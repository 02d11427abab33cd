package config

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden .err files under testdata/config/invalid")

const testdataDir = "../../../testdata/config"

// Secrets the fixtures reference; no error may ever contain them.
const (
	secretA = "sk-secret-aaaa1111"
	secretB = "sk-secret-bbbb2222"
)

// testEnv is the environment every fixture is parsed with.
func testEnv(name string) (string, bool) {
	v, ok := map[string]string{
		"SECRET_A":           secretA,
		"SECRET_B":           secretB,
		"EMPTY":              "",
		"TOLLGATE_KEY":       "tg-client-key-0001",
		"TOLLGATE_ADMIN_KEY": "tg-admin-key-0002",
		"NVIDIA_KEY_A":       "nvapi-key-a-000001",
		"NVIDIA_KEY_B":       "nvapi-key-b-000002",
		"NVIDIA_LLAMA_KEY":   "nvapi-llama-000003",
	}[name]
	return v, ok
}

// TestInvalidFixtures parses each broken config: it must fail, every hand-written fragment
// must appear, no secret may appear, and the whole message must match its golden file.
func TestInvalidFixtures(t *testing.T) {
	cases := map[string][]string{
		"unknown_kind":       {"unknown_kind.yaml:3: providers[0].kind: unknown kind \"gpt\" (valid: anthropic, claude-cli, codex-cli,"},
		"kind_missing":       {"providers[0].kind: required (one of: anthropic,"},
		"duplicate_provider": {":5: providers[1].name: duplicate provider name \"demo\" (also providers[0])"},
		"name_slash":         {":2: providers[0].name: \"my/provider\" must not contain \"/\""},
		"name_empty":         {":2: providers[0].name: required", ":3: providers[1].name: \"has space\" may contain only letters"},
		"lanes_zero":         {":4: providers[0].lanes: must be at least 1 (omit it for the kind's default of 8), got 0"},
		"lanes_negative":     {"providers[0].lanes: must be at least 1 (omit it for the kind's default of 1), got -2", "providers[0].queue_length: must be 0 (no queue) or more, got -1"},
		"model_lanes_zero":   {":4: providers[0].model_lanes: must be at least 1 (omit it for the kind's default of 4), got 0", ":7: providers[0].models[0].model_lanes: must be at least 1"},
		"model_lanes_exceed": {":5: providers[0].model_lanes: model_lanes (3) must not exceed lanes (2)", ":8: providers[0].models[0].model_lanes: model_lanes (5) must not exceed providers[0].lanes (2)"},
		"bad_duration":       {":2: limits.queue_timeout: 60 has no unit: use a unit, e.g. 60s", ":3: limits.retry_after: not a duration", ":7: providers[0].run_timeout: must be positive, got -5m0s", ":8: providers[0].queue_timeout: must be positive, got 0s"},
		"unknown_field":      {":2: limtis: unknown field (valid: listen, auth, limits, providers, metrics, drain_delay, drain_grace, routes, cluster, store)", ":7: providers[0].lane: unknown field (valid: name, kind,", ":10: providers[0].models[0].context: unknown field"},
		"cli_without_models": {"providers[0].models: list the models this codex-cli provider serves", "providers[1].models: list the models this fake provider serves"},
		"fake_fields_on_http": {":6: providers[0].models[0].reply: only for kind fake, not openai", "first_token_delay: only for kind fake", "tokens_per_second: only for kind fake",
			"models[0].fail: only for kind fake", "reasoning_text: only for kind fake"},
		"cli_fields_on_http": {":4: providers[0].command: only for CLI kinds", "providers[0].args: only for CLI kinds", "providers[0].env: only for CLI kinds", "providers[0].workdir: only for CLI kinds",
			"providers[0].kill_grace: only for CLI kinds", "providers[1].base_url: only for HTTP kinds", "providers[1].refresh_models: only for HTTP kinds",
			"providers[1].command: must not be empty (omit it for \"claude\")", "providers[1].env.1BAD: not a valid environment variable name"},
		"keys_on_cli":      {":4: providers[0].keys: not used by kind claude-cli", ":7: providers[0].models[0].keys: not used by kind claude-cli"},
		"limits":           {"limits.max_admitted: must be at least max_running (20), got 10", "limits.queue_length: must be 0 (no queue) or more, got -1", "limits.retry_after: must be between 1s and 1m0s", "limits.max_body_bytes: must be at least 1, got 0"},
		"max_running_zero": {"limits.max_running: must be at least 1, got 0", "limits.retry_after: must be between 1s and 1m0s (Retry-After is whole seconds), got 500ms"},
		"bad_listen":       {":1: listen: must be host:port, e.g. 127.0.0.1:8080, got \"localhost\""},
		"bad_listen_port":  {"listen: port must be a number from 0 to 65535, got \"http-alt\""},
		"duplicate_model":  {":7: providers[0].models[2].id: duplicate model id \"echo\" (also models[0])", ":8: providers[0].models[3].id: required"},
		"fallback_unknown": {"fallbacks[0]: unknown model \"demo/b\": provider \"demo\" has models a, c", "fallbacks[1]: unknown model \"nope/x\": no provider \"nope\" (providers: cloud, demo)",
			"fallbacks[2]: \"justaname\" is neither \"provider/model\" nor an alias", "fallbacks[3]: a model cannot fall back to itself"},
		"alias_patterns": {"providers[0].aliases[1]: \"plain\": a provider's alias is a pattern ending in '*'", "providers[1].models[0].aliases[0]: duplicate alias \"claude-*\" (also providers[0].aliases[0])",
			"providers[1].models[0].aliases[1]: \"mid*dle*\": '*' may only end an alias"},
		"alias_conflicts": {"aliases[1]: \"demo/b\" is already a model id", "aliases[2]: must be non-empty without surrounding white space", "aliases[3]: \"demo/later\" looks like a model of provider \"demo\"", "models[1].aliases[0]: duplicate alias \"quick\" (also providers[0].models[0].aliases[0])"},
		"base_url":        {":4: providers[0].base_url: must be an http:// or https:// URL", ":7: providers[1].base_url: has no host", "providers[2].refresh_models: must be 0 (read once at start) or more, got -1s"},
		"unset_env": {":2: environment variable TOLLGATE_TEST_UNSET is not set (use ${TOLLGATE_TEST_UNSET:-default} for an optional value)",
			":6: environment variable ALSO_UNSET is not set", ":6: ${bad-name}: not a valid environment variable name", ":6: unterminated ${ (write $${ for a literal ${)",
			":7: providers[0].lanes: must be at least 1", ":8: environment variable BASE_UNSET is not set"},
		"empty_key":    {":2: auth.api_keys[0]: empty key", ":2: auth.api_keys[1]: key has leading or trailing white space", ":3: auth.admin_keys[0]: empty key", ":7: providers[0].keys[0]: empty key"},
		"rate_limit":   {"providers[0].rate_limit.rpm: must be 0 (unlimited) or more, got -1", "providers[0].rate_limit.tpm: must be 0 (unlimited) or more, got -5", "providers[1].rate_limit: set rpm or tpm (or remove rate_limit)"},
		"type_errors":  {":1: listen: expected a string, got a list", ":2: auth: expected a mapping, got a string", ":4: limits.max_running: expected a whole number, got a string", ":5: limits.max_body_bytes: expected a whole number, got a number with a fraction", ":9: providers[0].lanes: expected a whole number, got a string", ":10: providers[0].keys: expected a list, got a string", "tools: expected a boolean (true or false), got a string", "context_window: expected a whole number", ":15: providers[1]: expected a mapping, got a string"},
		"syntax_error": {"syntax_error.yaml:1: invalid YAML: did not find expected"},
		"empty":        {"empty.yaml: empty config"},
		"cli_args": {":4: providers[0].args[2]: --skip-git-repo-check is already passed by Tollgate to every codex-cli run", ":4: providers[0].args[3]: --model is already passed",
			":8: providers[1].args[0]: --print is already passed by Tollgate to every claude-cli run", ":10: drain_delay: must be 0 (no delay) or more, got -1s", ":11: drain_grace: must be positive, got 0s"},
		"model_fields": {"context_window: must be at least 1 (omit it when unknown), got 0", "max_output_tokens: must be at least 1 (omit it when unknown), got -1", "first_token_delay: must be 0 or more, got -1s", "tokens_per_second: must be 0 (as fast as possible) or more, got -3",
			":10: providers[0].models[0].fail: unknown fail mode \"rate_limit\" (valid: rate_limited, unavailable,"},
		"affinity": {":2: limits.affinity_ttl: must be positive, got 0s", ":3: limits.affinity_max: must be at least 1, got -3"},
		"server_limits": {":2: limits.max_event_bytes: must be at least 1, got 0", ":3: limits.header_timeout: must be positive, got 0s",
			":4: limits.body_timeout: must be positive, got -1s", ":5: limits.idle_timeout: must be positive, got 0s",
			":6: limits.max_header_bytes: must be at least 1024", ":7: limits.max_conns_per_client: must be 0 (no cap) or more, got -2"},
		"inherited_lanes": {":5: providers[0].model_lanes: model_lanes (3) must not exceed lanes (2)", ":6: providers[0].models[1].model_lanes: model_lanes (9)", ":8: providers[1].kind: unknown kind"},
		"resilience": {":1: limits.max_retry_wait: must be positive, got 0s", ":1: limits.retries: must be 0 (no retries) or more, got -1", ":1: limits.retry_budget: must be a share above 0 and at most 1 (0.2 = 20% of calls), got 1.5",
			":5: providers[0].key_rate_limit.tpm: must be 0 (unlimited) or more, got -3", ":7: providers[0].max_key_cooldown: must be at least key_cooldown (1m0s), got 30s", ":8: providers[0].retries: must be 0 (no retries) or more, got -2",
			":9: providers[0].lanes_probe: must be at least 1, got 0", ":10: providers[0].rate_limit.burst: is the rpm bucket's size: set rpm too", ":11: providers[0].breaker.failures: must be at least 1, got 0",
			":11: providers[0].breaker.open_for: must be between 1s and 5m0s, got 10m0s", ":11: providers[0].breaker.ratio: must be a share above 0 and at most 1, got 0",
			":14: providers[1].key_cooldown: only for HTTP kinds, which have keys; not kind codex-cli", ":15: providers[1].key_rate_limit: only for HTTP kinds", ":15: providers[1].key_rate_limit.burst: must be 0 (ten seconds' worth) or more, got -1"},
		"model_type": {":6: providers[0].models[0].type: must be chat or embedding, got \"embeddings\"", ":12: providers[1].models[0].type: kind codex-cli has no embeddings"},
		"fallback_on": {":7: providers[0].models[0].fallback_on[1]: unknown failure \"queue_ful\" (valid: rate_limited, unavailable, queue_full, queue_timeout)", ":7: providers[0].models[0].fallback_on[2]: \"rate_limited\" listed twice",
			":9: providers[0].models[1].fallback_on: set without fallbacks"},
		"routes": {":10: routes[0].rules[0].when.cel: not a valid CEL expression: column 24: Syntax error: extraneous input '>'", ":13: routes[0].rules[1].model: unknown model \"demo/missing\": provider \"demo\" has models echo",
			":12: routes[0].rules[1].when.last_user_matches: not a valid regular expression: error parsing regexp: missing closing ): `(unclosed`", ":12: routes[0].rules[1].when.max_prompt_tokens: must be 0 or more, got -1",
			":15: routes[0].rules[2].model: unknown model \"nope/x\": no provider \"nope\"", ":14: routes[0].rules[2].when.cel: the CEL expression must be true or false, it gives a int",
			":17: routes[1].name: duplicate route \"support\" (also routes[0])", ":19: routes[2].name: \"quick\" is already an alias of demo/echo", ":20: routes[2].rules[0].model: \"support\" is a route: a rule names a real model (routes do not chain)",
			":21: routes[3].name: \"a/b\" may contain only letters", ":23: routes[3].rules[0].when: only the last rule may have no condition", ":24: routes[3].rules[1].when: the last rule must have no condition", ":26: routes[4].rules: a route needs at least one rule"},
		"cluster": {":2: cluster.redis.addr: must be host:port, e.g. 127.0.0.1:6379, got \"localhost\"", ":2: cluster.redis.db: must be 0 or more, got -1",
			":3: cluster.lease_ttl: must be between 1s and 5m0s, got 500ms", ":4: cluster.replica: may contain only printable ASCII without spaces or '|'"},
		"allowed": {":2: auth.allowed_hosts[1]: \"gw.example.com:8080\": give the host without a port", ":2: auth.allowed_hosts[2]: \"https://gw.example.com\" is not a host name",
			":2: auth.allowed_hosts[3]: empty host", ":2: auth.allowed_hosts[4]: \"*.com\": a wildcard needs a domain of two labels", ":3: auth.allowed_origins[1]: \"null\" is the origin of sandboxed frames",
			":3: auth.allowed_origins[2]: \"*\" would let every web page", ":3: auth.allowed_origins[3]: \"app.example.com\" is not an origin", ":3: auth.allowed_origins[4]: \"https://app.example.com/ui\" is not an origin: an origin is scheme://host[:port] only"},
		"cluster_outage": {":2: cluster.redis.timeout: must be 0 (lease_ttl/5) or between 10ms and lease_ttl/2 (2s), got 3s",
			":4: cluster.outage: must be \"share\" or \"strict\", got \"lenient\""},
		"client_keys": {":4: auth.api_keys[1].weight: must be at least 1, got 0", ":5: auth.api_keys[2].colour: unknown field",
			":5: auth.api_keys[2].key: the same key as auth.api_keys[0]", ":5: auth.api_keys[2].name: \"alice\" is also the name",
			":6: auth.api_keys[3].budget.period: a budget needs a period", ":7: auth.api_keys[4].key: required",
			":10: auth.api_keys[7].name: \"key-1\" is also the name of auth.api_keys[0]", ":11: auth.api_keys[8]: expected a key"},
		"store":         {":1: store: set sqlite or postgres, not both"},
		"store_empty":   {":1: store: set sqlite: PATH or postgres: DSN"},
		"many_problems": {":2: listen:", ":3: limits.max_admitted:", ":5: providers[0].name:", ":7: providers[0].lanes:", ":8: providers[1].models:", ":10: providers[2].name: duplicate", ":11: providers[2].kind: unknown kind \"wat\""},
	}
	files, err := filepath.Glob(filepath.Join(testdataDir, "invalid", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			want, ok := cases[name]
			if !ok {
				t.Fatalf("fixture %s has no expectations in this table", name)
			}
			delete(cases, name)
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := Parse(filepath.Base(file), data, testEnv)
			if err == nil {
				t.Fatalf("parsed without error: %v", cfg.Summary())
			}
			msg := err.Error()
			for _, w := range want {
				if !strings.Contains(msg, w) {
					t.Errorf("error lacks %q\nfull error:\n%s", w, msg)
				}
			}
			assertNoSecrets(t, msg)
			var fe *FieldError
			if !errors.As(err, &fe) || fe.File != filepath.Base(file) {
				t.Errorf("error is not a *FieldError naming the file: %#v", err)
			}
			golden(t, strings.TrimSuffix(file, ".yaml")+".err", msg+"\n")
		})
	}
	t.Cleanup(func() {
		for name := range cases {
			t.Errorf("expectation %q has no fixture file", name)
		}
	})
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("missing golden file (run go test -update): %v", err)
	}
	if string(want) != got {
		t.Errorf("mismatch with %s\n--- want\n%s--- got\n%s", path, want, got)
	}
}

// envSecrets are the key values testEnv hands out.
var envSecrets = []string{secretA, secretB, "tg-client-key-0001", "tg-admin-key-0002", "nvapi-key-a", "nvapi-key-b", "nvapi-llama"}

func assertNoSecrets(t *testing.T, s string) {
	t.Helper()
	assertNone(t, s, append(envSecrets, "padded-key")...)
}

func assertNone(t *testing.T, s string, secrets ...string) {
	t.Helper()
	for _, sec := range secrets {
		if strings.Contains(s, sec) {
			t.Errorf("output contains secret %q:\n%s", sec, s)
		}
	}
}
