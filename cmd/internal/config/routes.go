package config

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tollgate/tollgate/providers/route"
)

// Route is a client-facing model id that picks a real model per request from ordered rules
// (SPEC §12): the first rule whose conditions all hold wins; the last rule has none.
type Route struct {
	// Name is the model id clients ask for: letters, digits, '.', '_', '-'; no "/".
	Name  string      `yaml:"name"`
	Rules []RouteRule `yaml:"rules"`
}

// RouteRule sends the requests its When matches to Model ("provider/model" or an alias,
// never another route). Only the last rule may, and must, omit When.
type RouteRule struct {
	When  *RouteWhen `yaml:"when"`
	Model string     `yaml:"model"`
}

// RouteWhen is a rule's conditions; every one set must hold. Prompt tokens are estimated
// before any backend sees the request (about four bytes of text a token).
type RouteWhen struct {
	MinPromptTokens *int  `yaml:"min_prompt_tokens"` // at least this many prompt tokens
	MaxPromptTokens *int  `yaml:"max_prompt_tokens"` // at most this many
	Tools           *bool `yaml:"tools"`             // the request defines tools (true) or none (false)
	Images          *bool `yaml:"images"`            // it carries an image (true) or none (false)
	// Task is the exact value of the request's X-Gateway-Task header.
	Task string `yaml:"task"`
	// LastUserMatches is a regular expression (RE2) searched in the last user message.
	LastUserMatches string `yaml:"last_user_matches"`
	// CEL is an expression over request, task, prompt_tokens and last_user that must be true
	// (providers/route documents the variables).
	CEL string `yaml:"cel"`
}

// Compile returns the route's matcher. A validated config's routes always compile.
func (r *Route) Compile() (*route.Route, error) {
	rules := make([]route.Rule, len(r.Rules))
	for i, rr := range r.Rules {
		rules[i].Model = rr.Model
		if w := rr.When; w != nil {
			rules[i].When = &route.Conditions{MinPromptTokens: w.MinPromptTokens, MaxPromptTokens: w.MaxPromptTokens,
				Tools: w.Tools, Images: w.Images, Task: w.Task, LastUser: w.LastUserMatches, CEL: w.CEL}
		}
	}
	return route.New(r.Name, rules)
}

// String summarises a route: its name and candidate models.
func (r Route) String() string {
	models := make([]string, 0, len(r.Rules))
	for _, rr := range r.Rules {
		models = append(models, rr.Model)
	}
	return fmt.Sprintf("%s (%s: %s)", r.Name, plural(len(r.Rules), "rule"), strings.Join(models, " "))
}

// ruleFields maps route.RuleError fields to their YAML names.
var ruleFields = map[string]string{"when.last_user": "when.last_user_matches"}

// validateRoutes checks every route: its name is unique and clashes with no model id or alias,
// each rule's model exists and is not a route, and its conditions compile (a bad regular
// expression or CEL expression is reported at its line).
func validateRoutes(c *Config, p *problems) {
	byName, aliases := providersAndAliases(c)
	names := routeNames(c, aliases, p)
	for i := range c.Routes {
		r := &c.Routes[i]
		path := fmt.Sprintf("routes[%d]", i)
		for j, rr := range r.Rules {
			mp := fmt.Sprintf("%s.rules[%d].model", path, j)
			switch _, isRoute := names[rr.Model]; {
			case rr.Model == "":
			case isRoute:
				p.add(mp, "%q is a route: a rule names a real model (routes do not chain)", rr.Model)
			default:
				if msg := checkFallback(rr.Model, byName, aliases); msg != "" {
					p.add(mp, "%s", msg)
				}
			}
		}
		compileRoute(r, path, p)
	}
}

// providersAndAliases indexes c's providers by name (the first of a duplicated name) and its
// model aliases to the model ids they stand for.
func providersAndAliases(c *Config) (byName map[string]*Provider, aliases map[string]string) {
	byName, aliases = map[string]*Provider{}, map[string]string{}
	for i := range c.Providers {
		pr := &c.Providers[i]
		if _, dup := byName[pr.Name]; !dup {
			byName[pr.Name] = pr
		}
		for j := range pr.Models {
			for _, a := range pr.Models[j].Aliases {
				aliases[a] = pr.ModelID(&pr.Models[j])
			}
		}
	}
	return byName, aliases
}

// routeNames checks each route's name and returns the valid ones with their route's index.
func routeNames(c *Config, aliases map[string]string, p *problems) map[string]int {
	names := map[string]int{}
	for i := range c.Routes {
		r := &c.Routes[i]
		path := fmt.Sprintf("routes[%d]", i)
		switch first, dup := names[r.Name]; {
		case r.Name == "":
			p.add(path+".name", "required: the model id clients ask for")
		case !validName(r.Name):
			p.add(path+".name", "%q may contain only letters, digits, '.', '_' and '-' (no \"/\": it is a model id of its own)", r.Name)
		case dup:
			p.add(path+".name", "duplicate route %q (also routes[%d])", r.Name, first)
		case aliases[r.Name] != "":
			p.add(path+".name", "%q is already an alias of %s", r.Name, aliases[r.Name])
		default:
			names[r.Name] = i
		}
	}
	return names
}

// compileRoute compiles r's conditions and reports each error at the field it names.
func compileRoute(r *Route, path string, p *problems) {
	_, err := r.Compile()
	if err == nil {
		return
	}
	for _, e := range unjoin(err) {
		re, ok := errors.AsType[*route.RuleError](e)
		if !ok {
			p.add(path, "%v", e)
			continue
		}
		field := re.Field
		if f, ok := ruleFields[field]; ok {
			field = f
		}
		if len(r.Rules) == 0 {
			p.add(path+".rules", "%s", re.Msg)
			continue
		}
		p.add(fmt.Sprintf("%s.rules[%d].%s", path, re.Rule, field), "%s", re.Msg)
	}
}

// unjoin lists the errors an errors.Join holds, or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
