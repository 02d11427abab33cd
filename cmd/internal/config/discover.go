package config

import (
	_ "embed"
	"fmt"
	"net"
	"strings"
	"time"
)

//go:embed default.yaml
var defaultYAML []byte

// DefaultSource is Config.Source for the embedded default.
const DefaultSource = "embedded default"

// envKinds maps the API-key variables auto-discovery looks for to provider kinds, in the
// order providers are added. The provider is named after its kind.
var envKinds = []struct{ env, kind string }{
	{"OPENAI_API_KEY", "openai"},
	{"ANTHROPIC_API_KEY", "anthropic"},
	{"GEMINI_API_KEY", "gemini"},
	{"NVIDIA_API_KEY", "nvidia"},
	{"DEEPSEEK_API_KEY", "deepseek"},
	{"DASHSCOPE_API_KEY", "qwen"},
	{"ARK_API_KEY", "doubao"},
	{"QIANFAN_API_KEY", "ernie"},
}

// cliFinds lists the CLIs looked up on PATH. Their default model lists are a starting point:
// CLIs cannot report their models, so a user who wants others writes a config file (see
// testdata/config/example.yaml). The Gemini CLI is named "gemini-cli" so it never collides
// with the "gemini" API provider.
var cliFinds = []struct {
	command, name, kind string
	models              []string
}{
	{"codex", "codex", "codex-cli", []string{"gpt-5-codex"}},
	{"claude", "claude", "claude-cli", []string{"sonnet", "opus", "haiku"}},
	{"gemini", "gemini-cli", "gemini-cli", []string{"gemini-2.5-pro", "gemini-2.5-flash"}},
}

// localServers lists the local HTTP servers probed on their usual ports.
var localServers = []struct{ name, addr string }{
	{"lmstudio", "127.0.0.1:1234"},
	{"ollama", "127.0.0.1:11434"},
}

// Default returns the embedded default config (a "demo" provider of kind fake) plus every
// backend discovery finds: API keys in env, CLIs found by lookPath, local servers for which
// probe reports a listener. Production passes os.LookupEnv, exec.LookPath and ProbeTCP.
// Each discovered provider records how it was found in Discovered. The result is defaulted;
// it is valid by construction (tests check it) so Default returns no error.
func Default(env func(string) (string, bool), lookPath func(string) (string, error), probe func(addr string) bool) *Config {
	cfg, err := Parse(DefaultSource, defaultYAML, func(string) (string, bool) { return "", false })
	if err != nil {
		panic(fmt.Sprintf("config: embedded default is invalid: %v", err)) // a build defect, caught by tests
	}
	var found []Provider
	for _, e := range envKinds {
		key, _ := env(e.env)
		if key = strings.TrimSpace(key); key != "" {
			found = append(found, Provider{Name: e.kind, Kind: e.kind, Keys: []string{key}, Discovered: "env " + e.env})
		}
	}
	for _, c := range cliFinds {
		path, err := lookPath(c.command)
		if err != nil || path == "" {
			continue
		}
		p := Provider{Name: c.name, Kind: c.kind, Command: path, Discovered: "PATH " + path}
		for _, id := range c.models {
			p.Models = append(p.Models, Model{ID: id})
		}
		found = append(found, p)
	}
	for _, s := range localServers {
		if probe(s.addr) {
			found = append(found, Provider{Name: s.name, Kind: s.name, BaseURL: "http://" + s.addr + "/v1", Discovered: "port " + s.addr})
		}
	}
	for i := range found {
		p := &found[i]
		zero := func(_ string, zero bool) bool { return zero }
		providerDefaults(p, &cfg.Limits, zero)
		providerResilienceDefaults(p, &cfg.Limits, zero)
		for j := range p.Models {
			p.Models[j].ModelLanes = p.ModelLanes
		}
	}
	cfg.Providers = append(cfg.Providers, found...)
	return cfg
}

// probeTimeout bounds one local-server probe; a local listener answers in microseconds.
const probeTimeout = 300 * time.Millisecond

// ProbeTCP reports whether something accepts TCP connections at addr.
func ProbeTCP(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, probeTimeout)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}
