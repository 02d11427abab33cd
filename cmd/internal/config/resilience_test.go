package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestResilienceFields: the SPEC §8 resilience example parses, overrides win, the omitted
// fields get their defaults, and the routes compile and pick.
func TestResilienceFields(t *testing.T) {
	src := `limits: {retries: 3, retry_budget: 0.1, max_retry_wait: 500ms}
providers:
  - name: deepseek
    kind: deepseek
    keys: ["${SECRET_A}", "${SECRET_B}"]
    rate_limit: {rpm: 6, burst: 3}
    key_rate_limit: {rpm: 60}
    key_cooldown: 20s
    retries: 0
    adaptive_lanes: false
    lanes_probe: 5
    breaker: {failures: 3, open_for: 10s}
    models:
      - id: deepseek-chat
        fallbacks: [qwen/qwen-plus]
        fallback_on: [rate_limited, queue_full]
      - id: deepseek-coder
        fallbacks: [qwen/qwen-plus]
  - name: qwen
    kind: qwen
    models: [{id: qwen-plus}, {id: qwen-max}]
routes:
  - name: support
    rules:
      - when: {max_prompt_tokens: 2000, tools: false}
        model: deepseek/deepseek-chat
      - when: {cel: 'request.messages.size() > 20'}
        model: qwen/qwen-max
      - model: qwen/qwen-plus
`
	cfg, err := Parse("r.yaml", []byte(src), testEnv)
	if err != nil {
		t.Fatal(err)
	}
	if l := cfg.Limits; l.Retries != 3 || l.RetryBudget != 0.1 || l.MaxRetryWait.D() != 500*time.Millisecond {
		t.Errorf("limits %+v", l)
	}
	ds, qw := cfg.Providers[0], cfg.Providers[1]
	if ds.Retries != 0 || qw.Retries != 3 {
		t.Errorf("retries: explicit 0 kept (%d), omitted takes limits.retries (%d)", ds.Retries, qw.Retries)
	}
	if ds.Adaptive() || !qw.Adaptive() || ds.LanesProbe != 5 || qw.LanesProbe != 20 {
		t.Errorf("adaptive %v/%v probe %d/%d", ds.Adaptive(), qw.Adaptive(), ds.LanesProbe, qw.LanesProbe)
	}
	if ds.Breaker != (Breaker{Failures: 3, Ratio: 0.5, OpenFor: Duration(10 * time.Second)}) {
		t.Errorf("breaker %+v", ds.Breaker)
	}
	if ds.KeyCooldown.D() != 20*time.Second || ds.MaxKeyCooldown.D() != 5*time.Minute || qw.KeyCooldown.D() != 10*time.Second {
		t.Errorf("cooldowns %s..%s, qwen %s", ds.KeyCooldown, ds.MaxKeyCooldown, qw.KeyCooldown)
	}
	if ds.RateLimit.Burst != 3 || ds.KeyRateLimit.RPM != 60 {
		t.Errorf("rate limits %+v %+v", ds.RateLimit, ds.KeyRateLimit)
	}
	if got := ds.Models[0].FallbackOn; !slices.Equal(got, []string{"rate_limited", "queue_full"}) {
		t.Errorf("fallback_on %v", got)
	}
	if got := ds.Models[1].FallbackOn; !slices.Equal(got, fallbackOnAll) {
		t.Errorf("default fallback_on %v", got)
	}
	if qw.Models[0].FallbackOn != nil {
		t.Errorf("a model without fallbacks has fallback_on %v", qw.Models[0].FallbackOn)
	}
	r, err := cfg.Routes[0].Compile()
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Models(); !slices.Equal(got, []string{"deepseek/deepseek-chat", "qwen/qwen-max", "qwen/qwen-plus"}) {
		t.Errorf("route models %v", got)
	}
	summary := strings.Join(cfg.Summary(), "\n")
	for _, want := range []string{"rpm 6, tpm 0, burst 3,", "key_rate_limit rpm 60 tpm 0", "retries 0, adaptive_lanes off",
		"resilience: retries 3, retry_budget 0.1, max_retry_wait 500ms", "route support (3 rules:"} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary lacks %q:\n%s", want, summary)
		}
	}
	assertNone(t, summary, secretA, secretB)
	if s := strings.Join(parseFile(t, "minimal.yaml").Summary(), "\n"); strings.Contains(s, "resilience") {
		t.Errorf("a config with only defaults mentions resilience:\n%s", s)
	}
	if route := cfg.Routes[0].String(); route != "support (3 rules: deepseek/deepseek-chat qwen/qwen-max qwen/qwen-plus)" {
		t.Errorf("route summary %q", route)
	}
}
