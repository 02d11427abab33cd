package config

import (
	"fmt"
	"strings"
	"testing"
)

const clientKeysYAML = `
auth:
  api_keys:
    - "tg-plain-key-000001"
    - name: alice
      key: "tg-alice-key-000001"
      weight: 3
      max_running: 4
      max_queued: 20
      rate_limit: {rpm: 60, tpm: 200000}
      models: ["demo/*", "local/qwen"]
      max_priority: normal
      budget: {usd: 50, period: month}
    - {key: "tg-third-key-000001"}
  admin_keys: ["tg-admin-key-000001"]
store: {postgres: "postgres://tollgate:pg-password-0001@127.0.0.1:5432/tg"}
providers:
  - name: demo
    kind: fake
    models: [{id: echo}]
`

func TestClientKeys(t *testing.T) {
	cfg, err := Parse("keys.yaml", []byte(clientKeysYAML), testEnv)
	if err != nil {
		t.Fatal(err)
	}
	keys := cfg.Auth.APIKeys
	if len(keys) != 3 {
		t.Fatalf("api_keys = %d entries, want 3", len(keys))
	}
	if k := keys[0]; k.Name != "key-1" || k.Key != "tg-plain-key-000001" || k.Weight != 1 || k.Budget != nil || k.RateLimit != nil {
		t.Errorf("string entry = %+v, want key-1 with weight 1 and no limits", k)
	}
	a := keys[1]
	if a.Name != "alice" || a.Weight != 3 || a.MaxRunning != 4 || a.MaxQueued != 20 || a.RateLimit == nil ||
		*a.RateLimit != (ClientRate{RPM: 60, TPM: 200000}) || len(a.Models) != 2 || a.Budget == nil ||
		*a.Budget != (Budget{USD: 50, Period: "month"}) {
		t.Errorf("alice = %+v", a)
	}
	if p, ok := a.Priority(); !ok || p.String() != "normal" {
		t.Errorf("alice's max_priority = %v %v, want normal", p, ok)
	}
	if k := keys[2]; k.Name != "key-3" || k.Weight != 1 {
		t.Errorf("unnamed object = %q weight %d, want key-3 weight 1", k.Name, k.Weight)
	}
	if cfg.Store == nil || cfg.Store.Postgres == "" {
		t.Fatalf("store = %v", cfg.Store)
	}
	// Nothing printable shows a secret: not the summary, not %v or %#v of the parts.
	shown := strings.Join(cfg.Summary(), "\n") + fmt.Sprintf("%v %+v %#v %v %#v", cfg, cfg.Auth, cfg.Auth, a, cfg.Store)
	assertNone(t, shown, "tg-plain-key-000001", "tg-alice-key-000001", "tg-third-key-000001", "pg-password-0001")
	if !strings.Contains(shown, "store: postgres") {
		t.Errorf("summary does not name the store:\n%s", shown)
	}
}

// TestClientKeySecretsScrubbed: a problem elsewhere in a key object never quotes the key.
func TestClientKeySecretsScrubbed(t *testing.T) {
	bad := strings.Replace(clientKeysYAML, "weight: 3", "weight: tg-alice-key-000001", 1)
	bad = strings.Replace(bad, "127.0.0.1:5432", "127.0.0.1:5432 pg-password-0001", 1)
	_, err := Parse("keys.yaml", []byte(bad), testEnv)
	if err == nil || !strings.Contains(err.Error(), "auth.api_keys[1].weight") {
		t.Fatalf("err = %v, want one naming auth.api_keys[1].weight", err)
	}
	assertNone(t, err.Error(), "tg-alice-key-000001", "pg-password-0001")
}
