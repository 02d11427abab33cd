package config

import (
	"fmt"
	"strings"
	"testing"
)

// TestSecretsNeverShown puts keys everywhere a key can be (and in places it should not be)
// and checks that no error, summary or fmt verb shows one.
func TestSecretsNeverShown(t *testing.T) {
	valid := `
auth: {api_keys: ["${SECRET_A}"], admin_keys: ["tg-admin-key-0002"]}
providers:
  - name: oa
    kind: openai
    base_url: "https://user:${SECRET_B}@example.com/v1?key=${SECRET_B}"
    keys: ["${SECRET_A}", "tg-client-key-0001"]
    models: [{id: m, keys: ["nvapi-llama-000003"]}]
  - name: cx
    kind: codex-cli
    env: {OPENAI_API_KEY: "nvapi-key-a-000001"}
    models: [{id: m}]
`
	cfg, err := Parse("s.yaml", []byte(valid), testEnv)
	if err != nil {
		t.Fatal(err)
	}
	assertNoSecrets(t, strings.Join(cfg.Summary(), "\n"))
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		assertNoSecrets(t, fmt.Sprintf(verb, cfg))
		assertNoSecrets(t, fmt.Sprintf(verb, *cfg))
		assertNoSecrets(t, fmt.Sprintf(verb, cfg.Providers))
		assertNoSecrets(t, fmt.Sprintf(verb, cfg.Auth))
		assertNoSecrets(t, fmt.Sprintf(verb, cfg.Providers[0].Models))
	}
	if !strings.Contains(cfg.Providers[0].String(), "https://example.com/v1") {
		t.Errorf("base_url not shown without user info and query: %s", cfg.Providers[0])
	}

	// Keys pasted into the wrong fields, with other problems around them.
	misplaced := []string{
		"listen: \"${SECRET_A}\"\nproviders: [{name: a, kind: fake, models: [{id: m}]}]\n",
		"limits: {max_running: \"${SECRET_A}\", queue_timeout: \"${SECRET_B}\"}\nproviders: [{name: a, kind: fake, models: [{id: m}]}]\n",
		"providers: [{name: \"${SECRET_A}\", kind: \"${SECRET_B}\"}]\n",
		"providers: [{name: a, kind: fake, models: [{id: m, fallbacks: [\"${SECRET_A}\"], aliases: [\"a/m\"]}]}]\n",
		"providers: [{name: a, kind: openai, base_url: \"${SECRET_A}://x\", keys: \"${SECRET_B}\"}]\n",
		"providers: [{name: a, kind: openai, rate_limit: \"${SECRET_A}\"}]\n",
		"providers: [{name: a, kind: openai}]\n${SECRET_A}: [\n",
		"auth: {api_keys: [\" ${SECRET_A}\"]}\nproviders: [{name: a, kind: openai, keys: [\"${SECRET_B}\", \"${SECRET_B}\"]}]\n",
		"providers: [{name: a, kind: codex-cli, env: {\"${SECRET_A}\": x}, keys: [\"${SECRET_B}\"]}]\n",
	}
	for i, src := range misplaced {
		_, err := Parse("s.yaml", []byte(src), testEnv)
		if err == nil {
			t.Errorf("case %d parsed without error", i)
			continue
		}
		assertNoSecrets(t, err.Error())
	}
}

// TestRejectedFieldDoesNotSpread: a limit that failed to decode must not turn into a zero that
// every provider inherits and is then blamed for.
func TestRejectedFieldDoesNotSpread(t *testing.T) {
	src := "limits: {queue_timeout: soon, queue_length: lots}\nproviders: [{name: a, kind: openai}]\n"
	_, err := Parse("s.yaml", []byte(src), testEnv)
	if err == nil {
		t.Fatal("no error")
	}
	if msg := err.Error(); strings.Contains(msg, "providers[0]") || strings.Count(msg, "\n") != 1 {
		t.Errorf("want exactly the two limits errors, got:\n%s", msg)
	}
}

// TestAliasBomb: a few KB of YAML aliases expanding to millions of values is refused quickly
// with one clear error instead of being walked or decoded.
func TestAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("x: &k a\n")
	b.WriteString("y: &m {id: q, fallbacks: [" + strings.Repeat("*k,", 300) + "*k]}\n")
	b.WriteString("z: &p {name: a, kind: fake, models: [" + strings.Repeat("*m,", 300) + "*m]}\n")
	b.WriteString("providers: [" + strings.Repeat("*p,", 300) + "*p]\n")
	_, err := Parse("bomb.yaml", []byte(b.String()), testEnv)
	if err == nil || !strings.Contains(err.Error(), "config too large") {
		t.Fatalf("err = %.300v", err)
	}
}

func TestProblemListIsCapped(t *testing.T) {
	src := "providers:\n" + strings.Repeat("  - {name: a, kind: nope}\n", 200)
	_, err := Parse("many.yaml", []byte(src), testEnv)
	if err == nil || strings.Count(err.Error(), "\n") != maxProblems || !strings.HasSuffix(err.Error(), "more problems") {
		t.Fatalf("err has %d lines, want %d plus a count", strings.Count(fmt.Sprint(err), "\n"), maxProblems)
	}
}
