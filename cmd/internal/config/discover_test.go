package config

import (
	"net"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

func TestDefaultWithoutDiscovery(t *testing.T) {
	cfg := Default(noEnv, noPath, noProbe)
	if err := cfg.Validate(); err != nil {
		t.Fatalf("embedded default invalid: %v", err)
	}
	if cfg.Source != DefaultSource || cfg.Listen != "127.0.0.1:8080" || len(cfg.Providers) != 1 {
		t.Fatalf("default = %v", cfg)
	}
	demo := cfg.Providers[0]
	var ids []string
	for _, m := range demo.Models {
		ids = append(ids, m.ID)
	}
	if demo.Name != "demo" || demo.Kind != "fake" || !slices.Equal(ids, []string{"echo", "slow", "thinker"}) {
		t.Errorf("demo = %v", demo)
	}
	if slow := demo.Models[1]; slow.FirstTokenDelay.D().Seconds() != 1 || slow.TokensPerSecond != 20 {
		t.Errorf("slow = %+v", slow)
	}
	if thinker := demo.Models[2]; thinker.ReasoningText == "" || thinker.Reasoning == nil || !*thinker.Reasoning {
		t.Errorf("thinker has no reasoning text")
	}
}

func TestDefaultDiscoversEverything(t *testing.T) {
	env := map[string]string{
		"OPENAI_API_KEY": "sk-openai-000001", "ANTHROPIC_API_KEY": "sk-ant-000002", "GEMINI_API_KEY": "AIza-000003",
		"NVIDIA_API_KEY": "nvapi-000004", "DEEPSEEK_API_KEY": "sk-ds-000005", "DASHSCOPE_API_KEY": "sk-dash-000006",
		"ARK_API_KEY": " ark-000007\n", "QIANFAN_API_KEY": "bce-000008",
	}
	lookEnv := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	lookPath := func(cmd string) (string, error) { return "/opt/bin/" + cmd, nil }
	var probed []string
	probe := func(addr string) bool { probed = append(probed, addr); return true }

	cfg := Default(lookEnv, lookPath, probe)
	if err := cfg.Validate(); err != nil {
		t.Fatalf("discovered config invalid: %v", err)
	}
	want := []struct{ name, kind, found string }{
		{"demo", "fake", ""},
		{"openai", "openai", "env OPENAI_API_KEY"}, {"anthropic", "anthropic", "env ANTHROPIC_API_KEY"},
		{"gemini", "gemini", "env GEMINI_API_KEY"}, {"nvidia", "nvidia", "env NVIDIA_API_KEY"},
		{"deepseek", "deepseek", "env DEEPSEEK_API_KEY"}, {"qwen", "qwen", "env DASHSCOPE_API_KEY"},
		{"doubao", "doubao", "env ARK_API_KEY"}, {"ernie", "ernie", "env QIANFAN_API_KEY"},
		{"codex", "codex-cli", "PATH /opt/bin/codex"}, {"claude", "claude-cli", "PATH /opt/bin/claude"},
		{"gemini-cli", "gemini-cli", "PATH /opt/bin/gemini"},
		{"lmstudio", "lmstudio", "port 127.0.0.1:1234"}, {"ollama", "ollama", "port 127.0.0.1:11434"},
	}
	if len(cfg.Providers) != len(want) {
		t.Fatalf("got %d providers: %v", len(cfg.Providers), cfg.Summary())
	}
	for i, w := range want {
		p := cfg.Providers[i]
		if p.Name != w.name || p.Kind != w.kind || p.Discovered != w.found {
			t.Errorf("providers[%d] = %s/%s found by %q, want %+v", i, p.Name, p.Kind, p.Discovered, w)
		}
		k := kinds[p.Kind]
		if p.Lanes != k.lanes || p.ModelLanes != k.modelLanes || p.RunTimeout.D() != k.runTimeout || p.QueueLength != 8 {
			t.Errorf("%s not defaulted: %v", p.Name, p)
		}
	}
	if k := cfg.Providers[7].Keys; len(k) != 1 || k[0] != "ark-000007" {
		t.Errorf("doubao key not trimmed")
	}
	if p := cfg.Providers[10]; p.Command != "/opt/bin/claude" || len(p.Models) != 3 || p.Models[0].ModelLanes != 1 {
		t.Errorf("claude = %v", p)
	}
	if p := cfg.Providers[13]; p.BaseURL != "http://127.0.0.1:11434/v1" || len(p.Models) != 0 {
		t.Errorf("ollama = %v", p)
	}
	if !slices.Equal(probed, []string{"127.0.0.1:1234", "127.0.0.1:11434"}) {
		t.Errorf("probed %v", probed)
	}
	summary := strings.Join(cfg.Summary(), "\n")
	for _, v := range env {
		if strings.Contains(summary, strings.TrimSpace(v)) {
			t.Errorf("summary shows a key:\n%s", summary)
		}
	}
	if !strings.Contains(summary, "found by env OPENAI_API_KEY") {
		t.Errorf("summary does not say how providers were found:\n%s", summary)
	}
}

func TestDefaultSkipsEmptyKeys(t *testing.T) {
	cfg := Default(func(k string) (string, bool) { return "  ", true }, noPath, noProbe)
	if len(cfg.Providers) != 1 {
		t.Errorf("blank env keys discovered providers: %v", cfg.Summary())
	}
}

func TestProbeTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	accepted := make(chan struct{})
	go func() { // exits when the listener is closed below
		defer close(accepted)
		if c, err := ln.Accept(); err == nil {
			c.Close()
		}
	}()
	if !ProbeTCP(addr) {
		t.Errorf("ProbeTCP(%s) = false with a listener", addr)
	}
	<-accepted
	ln.Close()
	if ProbeTCP(addr) {
		t.Errorf("ProbeTCP(%s) = true after the listener closed", addr)
	}
}

func noEnv(string) (string, bool)   { return "", false }
func noPath(string) (string, error) { return "", exec.ErrNotFound }
func noProbe(string) bool           { return false }
