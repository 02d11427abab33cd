package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tollgate/tollgate/providers/fake"
)

// validateModels checks one provider's model list.
func validateModels(pr *Provider, path string, p *problems) {
	k, known := kinds[pr.Kind]
	ids := map[string]int{}
	for j := range pr.Models {
		m := &pr.Models[j]
		mp := fmt.Sprintf("%s.models[%d]", path, j)
		if m.Price != nil {
			validatePrice(m.Price, mp+".price", p)
		}
		switch {
		case m.ID == "":
			p.add(mp+".id", "required")
		case strings.TrimSpace(m.ID) != m.ID:
			p.add(mp+".id", "%q has leading or trailing white space", m.ID)
		default:
			if first, dup := ids[m.ID]; dup {
				p.add(mp+".id", "duplicate model id %q (also models[%d])", m.ID, first)
			} else {
				ids[m.ID] = j
			}
		}
		// A value inherited from an invalid provider model_lanes was reported there. Without
		// the YAML tree (configs built in code), an equal value counts as inherited.
		inherited := m.ModelLanes == pr.ModelLanes
		if p.lines != nil {
			_, explicit := p.lines[mp+".model_lanes"]
			inherited = !explicit
		}
		inheritedBad := inherited && (pr.ModelLanes < 1 || pr.Lanes >= 1 && pr.ModelLanes > pr.Lanes)
		switch {
		case inheritedBad:
		case m.ModelLanes < 1:
			p.add(mp+".model_lanes", "must be at least 1 (omit it to use the provider's model_lanes of %d), got %d", pr.ModelLanes, m.ModelLanes)
		case pr.Lanes >= 1 && m.ModelLanes > pr.Lanes:
			p.add(mp+".model_lanes", "model_lanes (%d) must not exceed %s.lanes (%d)", m.ModelLanes, path, pr.Lanes)
		}
		validateKeys(m.Keys, mp+".keys", p)
		if known && k.family == familyCLI && len(m.Keys) > 0 {
			p.add(mp+".keys", "not used by kind %s (the CLI uses its own login)", pr.Kind)
		}
		validateFallbackOn(m, mp, p)
		validateType(m, known && k.family == familyCLI, pr.Kind, mp, p)
		atLeastOne(m.ContextWindow, mp+".context_window", p)
		atLeastOne(m.MaxOutputTokens, mp+".max_output_tokens", p)
		if known {
			validateFakeFields(m, k.family == familyFake, pr.Kind, mp, p)
		}
	}
}

// validateType checks a model's type: chat or embedding, and never embedding for a CLI kind,
// which has no embeddings.
func validateType(m *Model, cli bool, kind, mp string, p *problems) {
	switch {
	case m.Type != "" && m.Type != "chat" && m.Type != "embedding":
		p.add(mp+".type", "must be chat or embedding, got %q", m.Type)
	case m.Type == "embedding" && cli:
		p.add(mp+".type", "kind %s has no embeddings", kind)
	}
}

func atLeastOne(v *int, path string, p *problems) {
	if v != nil && *v < 1 {
		p.add(path, "must be at least 1 (omit it when unknown), got %d", *v)
	}
}

// validateFakeFields rejects the scripted-behaviour fields outside kind fake and checks them
// inside it.
func validateFakeFields(m *Model, fake bool, kind, mp string, p *problems) {
	if !fake {
		for field, isSet := range map[string]bool{"reply": m.Reply != "", "reasoning_text": m.ReasoningText != "",
			"first_token_delay": m.FirstTokenDelay != 0, "tokens_per_second": m.TokensPerSecond != 0, "fail": m.Fail != ""} {
			if isSet {
				p.add(mp+"."+field, "only for kind fake, not %s", kind)
			}
		}
		return
	}
	if m.FirstTokenDelay < 0 {
		p.add(mp+".first_token_delay", "must be 0 or more, got %s", m.FirstTokenDelay)
	}
	if m.TokensPerSecond < 0 {
		p.add(mp+".tokens_per_second", "must be 0 (as fast as possible) or more, got %g", m.TokensPerSecond)
	}
	if !slices.Contains(fakeFailModes, m.Fail) {
		p.add(mp+".fail", "unknown fail mode %q (valid: %s)", m.Fail, strings.Join(fakeFailModes[1:], ", "))
	}
}

// fakeFailModes are the failures providers/fake can inject; "" is none.
var fakeFailModes = []string{fake.FailNone, fake.FailRateLimited, fake.FailUnavailable, fake.FailInvalid,
	fake.FailAuth, fake.FailQuota, fake.FailUpstream, fake.FailMidstream, fake.FailTruncated, fake.FailHang}

// validateRefs checks what spans providers: aliases are unique and never shadow a model id;
// fallbacks name a model that exists (or may exist: an HTTP provider without a model list
// learns its models at start, so any model of it is accepted).
func validateRefs(c *Config, p *problems) {
	byName := map[string]*Provider{}
	full := map[string]bool{}
	for i := range c.Providers {
		pr := &c.Providers[i]
		if _, dup := byName[pr.Name]; !dup {
			byName[pr.Name] = pr
		}
		for j := range pr.Models {
			full[pr.ModelID(&pr.Models[j])] = true
		}
	}
	aliases := map[string]string{} // alias → path where first defined
	for i := range c.Providers {
		for a, alias := range c.Providers[i].Aliases {
			ap := fmt.Sprintf("providers[%d].aliases[%d]", i, a)
			if !strings.HasSuffix(alias, "*") {
				p.add(ap, "%q: a provider's alias is a pattern ending in '*' (a plain alias belongs on a model)", alias)
				continue
			}
			checkAlias(alias, ap, aliases, full, byName, p)
		}
	}
	forEachModel(c, func(pr *Provider, m *Model, mp string) {
		for a, alias := range m.Aliases {
			checkAlias(alias, fmt.Sprintf("%s.aliases[%d]", mp, a), aliases, full, byName, p)
		}
	})
	forEachModel(c, func(pr *Provider, m *Model, mp string) {
		for f, fb := range m.Fallbacks {
			fp := fmt.Sprintf("%s.fallbacks[%d]", mp, f)
			if fb == pr.ModelID(m) || slices.Contains(m.Aliases, fb) {
				p.add(fp, "a model cannot fall back to itself")
				continue
			}
			if msg := checkFallback(fb, byName, aliases); msg != "" {
				p.add(fp, "%s", msg)
			}
		}
	})
}

// checkAlias checks one alias at path ap and records it in aliases: unique, no white space
// around it, never a model id or shaped like one, '*' only at its end.
func checkAlias(alias, ap string, aliases map[string]string, full map[string]bool, byName map[string]*Provider, p *problems) {
	prov, _, hasSlash := strings.Cut(alias, "/")
	switch first, dup := aliases[alias]; {
	case strings.TrimSpace(alias) == "" || strings.TrimSpace(alias) != alias:
		p.add(ap, "must be non-empty without surrounding white space")
	case strings.Contains(strings.TrimSuffix(alias, "*"), "*"):
		p.add(ap, "%q: '*' may only end an alias (a prefix pattern)", alias)
	case full[alias]:
		p.add(ap, "%q is already a model id", alias)
	case hasSlash && byName[prov] != nil:
		// It would shadow a model the provider may list at start.
		p.add(ap, "%q looks like a model of provider %q; an alias must not start with a provider name and \"/\"", alias, prov)
	case dup:
		p.add(ap, "duplicate alias %q (also %s)", alias, first)
	default:
		aliases[alias] = ap
	}
}

// checkFallback returns why fb names no model, or "".
func checkFallback(fb string, byName map[string]*Provider, aliases map[string]string) string {
	if _, ok := aliases[fb]; ok {
		return ""
	}
	name, model, ok := strings.Cut(fb, "/")
	if !ok || name == "" || model == "" {
		return fmt.Sprintf("%q is neither \"provider/model\" nor an alias", fb)
	}
	target, ok := byName[name]
	if !ok {
		return fmt.Sprintf("unknown model %q: no provider %q (providers: %s)", fb, name, strings.Join(providerNames(byName), ", "))
	}
	if len(target.Models) == 0 {
		return "" // the provider's models are read from the backend at start
	}
	for i := range target.Models {
		if target.Models[i].ID == model {
			return ""
		}
	}
	ids := make([]string, len(target.Models))
	for i := range target.Models {
		ids[i] = target.Models[i].ID
	}
	return fmt.Sprintf("unknown model %q: provider %q has models %s", fb, name, strings.Join(ids, ", "))
}

func providerNames(byName map[string]*Provider) []string {
	out := make([]string, 0, len(byName))
	for n := range byName {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func forEachModel(c *Config, fn func(pr *Provider, m *Model, path string)) {
	for i := range c.Providers {
		pr := &c.Providers[i]
		for j := range pr.Models {
			fn(pr, &pr.Models[j], fmt.Sprintf("providers[%d].models[%d]", i, j))
		}
	}
}
