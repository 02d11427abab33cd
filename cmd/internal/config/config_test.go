package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func parseFile(t *testing.T, name string) *Config {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testdataDir, name))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse(name, data, testEnv)
	if err != nil {
		t.Fatalf("Parse(%s): %v", name, err)
	}
	return cfg
}

func TestExample(t *testing.T) {
	cfg := parseFile(t, "example.yaml")
	if got := cfg.Auth.APIKeys; len(got) != 1 || got[0].Key != "tg-client-key-0001" || got[0].Name != "key-1" || got[0].Weight != 1 {
		t.Errorf("api_keys not expanded: %d keys", len(got))
	}
	if len(cfg.Providers) != 4 {
		t.Fatalf("providers = %d, want 4", len(cfg.Providers))
	}
	nv := cfg.Providers[0]
	if nv.Lanes != 4 || nv.ModelLanes != 2 || nv.RunTimeout.D() != 10*time.Minute || nv.RateLimit == nil || nv.RateLimit.TPM != 200000 {
		t.Errorf("nvidia = %v", nv)
	}
	if len(nv.Keys) != 2 || nv.Keys[1] != "nvapi-key-b-000002" {
		t.Errorf("nvidia keys not expanded")
	}
	m := nv.Models[0]
	if m.ModelLanes != 1 || m.ContextWindow == nil || *m.ContextWindow != 131072 || m.Reasoning != nil || m.Tools == nil || !*m.Tools {
		t.Errorf("nvidia model = %v (context %v, reasoning %v)", m, m.ContextWindow, m.Reasoning)
	}
	codex := cfg.Providers[2]
	if codex.Env["CODEX_HOME"] != "/tmp/.codex" { // ${HOME:-/tmp} with HOME unset in testEnv
		t.Errorf("codex env CODEX_HOME = %q", codex.Env["CODEX_HOME"])
	}
	if codex.KillGrace.D() != 3*time.Second || codex.Workdir != "" || codex.RefreshModels != 0 {
		t.Errorf("codex = %v, kill_grace %s", codex, codex.KillGrace)
	}
	demo := cfg.Providers[3]
	if len(demo.Models) != 3 || demo.Models[1].FirstTokenDelay.D() != time.Second || demo.Models[1].TokensPerSecond != 20 || demo.Models[2].Reply != "42" {
		t.Errorf("demo models = %v", demo.Models)
	}
	if len(cfg.Routes) != 1 || nv.KeyRateLimit == nil || nv.KeyRateLimit.RPM != 20 || len(m.FallbackOn) != 4 {
		t.Errorf("example resilience: routes %d, key_rate_limit %v, fallback_on %v", len(cfg.Routes), nv.KeyRateLimit, m.FallbackOn)
	}
	if _, err := cfg.Routes[0].Compile(); err != nil {
		t.Errorf("example route: %v", err)
	}
	if cfg.Source != "example.yaml" {
		t.Errorf("Source = %q", cfg.Source)
	}
}

func TestMinimalGetsAllDefaults(t *testing.T) {
	cfg := parseFile(t, "minimal.yaml")
	want := Limits{MaxRunning: 10, MaxAdmitted: 16, QueueLength: 8, QueueTimeout: Duration(time.Minute),
		RetryAfter: Duration(time.Second), MaxBodyBytes: 8 << 20,
		Retries: 2, RetryBudget: 0.2, MaxRetryWait: Duration(2 * time.Second), MaxEventBytes: 8 << 20,
		AffinityTTL: Duration(time.Hour), AffinityMax: 100_000,
		HeaderTimeout: Duration(10 * time.Second), BodyTimeout: Duration(30 * time.Second),
		IdleTimeout: Duration(120 * time.Second), WriteTimeout: Duration(30 * time.Second), MaxHeaderBytes: 64 << 10, MaxConnsPerClient: 0}
	if cfg.Limits != want {
		t.Errorf("limits = %+v, want %+v", cfg.Limits, want)
	}
	if cfg.Listen != "127.0.0.1:8080" {
		t.Errorf("listen = %q", cfg.Listen)
	}
	p := cfg.Providers[0]
	if p.Lanes != 4 || p.ModelLanes != 2 || p.QueueLength != 8 || p.QueueTimeout.D() != time.Minute || p.RunTimeout.D() != time.Minute {
		t.Errorf("demo = %v", p)
	}
	if p.Models[0].ModelLanes != 2 {
		t.Errorf("model_lanes = %d, want the provider's 2", p.Models[0].ModelLanes)
	}
	wantBreaker := Breaker{Failures: 5, Ratio: 0.5, OpenFor: Duration(30 * time.Second)}
	if p.Retries != 2 || p.LanesProbe != 20 || !p.Adaptive() || p.Breaker != wantBreaker || p.KeyCooldown != 0 {
		t.Errorf("demo resilience: retries %d, probe %d, adaptive %v, breaker %+v, key_cooldown %s (fake has no keys)",
			p.Retries, p.LanesProbe, p.Adaptive(), p.Breaker, p.KeyCooldown)
	}
}

// TestDefaults covers each kind's row of SPEC §2 and how explicit values override it.
func TestDefaults(t *testing.T) {
	tests := []struct {
		name, yaml                  string
		lanes, modelLanes, queueLen int
		run, queueTimeout, refresh  time.Duration
		command                     string
	}{
		{"codex-cli", "kind: codex-cli\n    models: [{id: m}]", 3, 1, 8, 5 * time.Minute, time.Minute, 0, "codex"},
		{"claude-cli", "kind: claude-cli\n    models: [{id: m}]", 3, 1, 8, 5 * time.Minute, time.Minute, 0, "claude"},
		{"gemini-cli", "kind: gemini-cli\n    models: [{id: m}]", 3, 1, 8, 5 * time.Minute, time.Minute, 0, "gemini"},
		{"nvidia", "kind: nvidia", 4, 2, 8, 10 * time.Minute, time.Minute, 10 * time.Minute, ""},
		{"lmstudio", "kind: lmstudio", 1, 1, 8, 3 * time.Minute, time.Minute, 10 * time.Minute, ""},
		{"ollama", "kind: ollama", 1, 1, 8, 3 * time.Minute, time.Minute, 10 * time.Minute, ""},
		{"openai", "kind: openai", 8, 4, 8, 5 * time.Minute, time.Minute, 10 * time.Minute, ""},
		{"deepseek", "kind: deepseek", 8, 4, 8, 5 * time.Minute, time.Minute, 10 * time.Minute, ""},
		{"fake", "kind: fake\n    models: [{id: m}]", 4, 2, 8, time.Minute, time.Minute, 0, ""},
		{"nvidia one lane caps model_lanes", "kind: nvidia\n    lanes: 1", 1, 1, 8, 10 * time.Minute, time.Minute, 10 * time.Minute, ""},
		{"explicit values win", "kind: openai\n    lanes: 2\n    model_lanes: 2\n    queue_length: 3\n    queue_timeout: 5s\n    run_timeout: 1m\n    refresh_models: 0s",
			2, 2, 3, time.Minute, 5 * time.Second, 0, ""},
		{"explicit queue_length 0 means no queue", "kind: openai\n    queue_length: 0", 8, 4, 0, 5 * time.Minute, time.Minute, 10 * time.Minute, ""},
		{"empty value counts as omitted", "kind: openai\n    lanes:", 8, 4, 8, 5 * time.Minute, time.Minute, 10 * time.Minute, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "providers:\n  - name: p\n    " + tt.yaml + "\n"
			cfg, err := Parse("t.yaml", []byte(src), testEnv)
			if err != nil {
				t.Fatalf("%v\n%s", err, src)
			}
			p := cfg.Providers[0]
			got := []any{p.Lanes, p.ModelLanes, p.QueueLength, p.RunTimeout.D(), p.QueueTimeout.D(), p.RefreshModels.D(), p.Command}
			want := []any{tt.lanes, tt.modelLanes, tt.queueLen, tt.run, tt.queueTimeout, tt.refresh, tt.command}
			for i := range got {
				if got[i] != want[i] {
					t.Errorf("field %d: got %v, want %v (provider %v)", i, got[i], want[i], p)
				}
			}
		})
	}
}

func TestLimitsFeedProviderDefaults(t *testing.T) {
	src := "limits: {queue_length: 2, queue_timeout: 5s, max_running: 20}\nproviders: [{name: p, kind: openai}]\n"
	cfg, err := Parse("t.yaml", []byte(src), testEnv)
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Providers[0]
	if p.QueueLength != 2 || p.QueueTimeout.D() != 5*time.Second {
		t.Errorf("provider queue = %d/%s, want 2/5s", p.QueueLength, p.QueueTimeout)
	}
	if cfg.Limits.MaxAdmitted != 20 {
		t.Errorf("max_admitted = %d, want max_running (20) when omitted and larger than 16", cfg.Limits.MaxAdmitted)
	}
}

func TestKindDefaults(t *testing.T) {
	for _, kind := range Kinds() {
		k, ok := kinds[kind]
		if !ok || k.lanes < 1 || k.modelLanes < 1 || k.modelLanes > k.lanes || k.runTimeout <= 0 {
			t.Errorf("kinds[%s] = %d, %d, %s, %v", kind, k.lanes, k.modelLanes, k.runTimeout, ok)
		}
	}
	if _, ok := kinds["nope"]; ok {
		t.Error("kinds[nope] ok")
	}
	if len(Kinds()) != 14 {
		t.Errorf("Kinds() = %v, SPEC §8 lists 14", Kinds())
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tollgate.yaml")
	t.Setenv("TOLLGATE_LOAD_TEST_KEY", "sk-load-test-secret")
	src := "auth: {api_keys: [\"${TOLLGATE_LOAD_TEST_KEY}\"]}\nproviders: [{name: d, kind: fake, models: [{id: e}]}]\n"
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Source != path || cfg.Auth.APIKeys[0].Key != "sk-load-test-secret" {
		t.Errorf("Load: source %q, keys expanded %v", cfg.Source, cfg.Auth.APIKeys[0].Key == "sk-load-test-secret")
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml")); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("Load(missing) = %v, want an error naming the file", err)
	}
}

func TestValidateAfterChange(t *testing.T) {
	cfg := parseFile(t, "minimal.yaml")
	if err := cfg.Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	cfg.Providers[0].Lanes = 0
	cfg.Listen = "bad"
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "minimal.yaml: providers[0].lanes: must be at least 1") || !strings.Contains(err.Error(), "listen:") {
		t.Errorf("Validate() = %v", err)
	}
}

func TestDurationYAML(t *testing.T) {
	for in, want := range map[string]time.Duration{"250ms": 250 * time.Millisecond, "1h30m": 90 * time.Minute, "0s": 0} {
		src := "limits: {queue_timeout: " + in + "}\nproviders: [{name: p, kind: openai}]\n"
		cfg, err := Parse("t.yaml", []byte(src), testEnv)
		if in == "0s" {
			if err == nil || !strings.Contains(err.Error(), "limits.queue_timeout: must be positive") {
				t.Errorf("queue_timeout 0s: %v", err)
			}
			continue
		}
		if err != nil || cfg.Limits.QueueTimeout.D() != want {
			t.Errorf("%s: %v, %v", in, err, cfg)
		}
	}
	out, err := Duration(90 * time.Second).MarshalYAML()
	if err != nil || out != "1m30s" {
		t.Errorf("MarshalYAML = %v, %v", out, err)
	}
}

// TestAnchorsAndMerges: YAML anchors, aliases and merge keys work, and what they bring in is
// checked like fields written out.
func TestAnchorsAndMerges(t *testing.T) {
	src := "x-common: &common {kind: openai}\nproviders: [{<<: *common, name: a}]\n"
	if _, err := Parse("m.yaml", []byte(src), testEnv); err == nil || !strings.Contains(err.Error(), "m.yaml:1: x-common: unknown field") {
		t.Fatalf("an anchor outside the known fields must be reported: %v", err)
	}
	src = `providers:
  - &common {name: a, kind: openai, lanes: 2}
  - <<: [*common, {queue_length: 1}]
    name: b
    lanes: 1
  - <<: {lanez: 3}
    name: c
    kind: openai
`
	_, err := Parse("m.yaml", []byte(src), testEnv)
	if err == nil || err.Error() != "m.yaml:6: providers[2].lanez: unknown field (valid: "+strings.Join(fieldNames(reflect.TypeFor[Provider]()), ", ")+")" {
		t.Fatalf("unknown field inside a merge not reported alone: %v", err)
	}
	cfg, err := Parse("m.yaml", []byte(strings.Replace(src, "lanez", "lanes", 1)), testEnv)
	if err != nil {
		t.Fatal(err)
	}
	if a, b, c := cfg.Providers[0], cfg.Providers[1], cfg.Providers[2]; a.Lanes != 2 || b.Lanes != 1 || b.Kind != "openai" || b.QueueLength != 1 || c.Lanes != 3 {
		t.Errorf("merged providers: %v | %v | %v", a, b, c)
	}
}
