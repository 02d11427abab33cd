package app

import (
	"fmt"

	"github.com/rs/zerolog"
	"github.com/tollgate/tollgate/cmd/internal/config"

	"github.com/tollgate/tollgate/providers/anthropic"
	"github.com/tollgate/tollgate/providers/cli"
	"github.com/tollgate/tollgate/providers/fake"
	"github.com/tollgate/tollgate/providers/gemini"
	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/openai"
	"github.com/tollgate/tollgate/providers/upstream"
)

// backendFor builds the adapter of one configured provider; l gives the limits every adapter
// that reads a backend's stream applies.
func backendFor(p *config.Provider, l *config.Limits, log zerolog.Logger) (llm.Backend, error) {
	modelKeys := map[string][]string{}
	for _, m := range p.Models {
		if len(m.Keys) > 0 {
			modelKeys[m.ID] = m.Keys
		}
	}
	// The HTTP adapters take one shape of configuration (upstream.Config).
	cfg := upstream.Config{Name: p.Name, BaseURL: p.BaseURL, Keys: p.Keys, ModelKeys: modelKeys,
		Lanes: p.Lanes, MaxEventBytes: l.MaxEventBytes}
	switch {
	case p.Kind == "fake":
		return fakeBackend(p), nil
	case openai.Supports(p.Kind):
		return openai.New(p.Kind, cfg)
	case p.Kind == "anthropic":
		return anthropic.New(cfg)
	case p.Kind == "gemini":
		return gemini.New(cfg)
	case config.IsCLI(p.Kind):
		return cliBackend(p, log)
	}
	return nil, fmt.Errorf("provider %q: kind %q has no adapter in this build", p.Name, p.Kind)
}

func fakeBackend(p *config.Provider) *fake.Backend {
	cfg := fake.Config{Name: p.Name, Models: map[string]fake.Script{}}
	for _, m := range p.Models {
		cfg.Models[m.ID] = fake.Script{
			Reply: m.Reply, Reasoning: m.ReasoningText, FirstTokenDelay: m.FirstTokenDelay.D(),
			TokensPerSecond: m.TokensPerSecond, Fail: m.Fail,
		}
	}
	return fake.New(cfg)
}

func cliBackend(p *config.Provider, log zerolog.Logger) (llm.Backend, error) {
	models := make([]string, len(p.Models))
	for i, m := range p.Models {
		models[i] = m.ID
	}
	plog := log.With().Str("provider", p.Name).Logger()
	return cli.New(cli.Config{
		Kind: p.Kind, Name: p.Name, Command: p.Command, Args: p.Args, Env: p.Env, Workdir: p.Workdir,
		KillGrace: p.KillGrace.D(), Models: models,
		// stderr arrives redacted by the adapter; it explains failures, so it goes to the log.
		OnStderr: func(stderr string) {
			if stderr != "" {
				plog.Debug().Str("stderr", stderr).Msg("cli stderr")
			}
		},
	})
}
