package app

import (
	"fmt"

	"github.com/tollgate/tollgate/cmd/internal/config"
	"github.com/tollgate/tollgate/providers/anthropic"
	"github.com/tollgate/tollgate/providers/fake"
	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/openai"
)

// backendFor builds the adapter of one configured provider.
func backendFor(p *config.Provider) (llm.Backend, error) {
	modelKeys := map[string][]string{}
	for _, m := range p.Models {
		if len(m.Keys) > 0 {
			modelKeys[m.ID] = m.Keys
		}
	}
	switch {
	case p.Kind == "fake":
		return fakeBackend(p), nil
	case openai.Supports(p.Kind):
		return openai.New(openai.Config{Kind: p.Kind, Name: p.Name, BaseURL: p.BaseURL, Keys: p.Keys, ModelKeys: modelKeys})
	case p.Kind == "anthropic":
		return anthropic.New(anthropic.Config{Name: p.Name, BaseURL: p.BaseURL, Keys: p.Keys, ModelKeys: modelKeys})
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
