// Package route picks the model a routed request goes to (SPEC §12): a route is a client-facing
// model id of its own whose ordered rules look at the request, the first that matches names
// the model, and the last rule has no condition.
//
// A Route is compiled once (New: regular expressions and CEL expressions are checked there,
// so a bad one is a config error, not a request error) and then matches requests as a pure
// function of the request and its X-Gateway-Task header. It is safe for concurrent use. It
// depends on providers/llm and cel.dev/cel-go only, so the gateway and the HTTP layer can both
// use it.
package route

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"cel.dev/cel-go/cel"

	"github.com/tollgate/tollgate/providers/llm"
)

// Conditions is one rule's test; every condition set must hold (an empty Conditions matches
// everything). Pointers are nil when the condition is not set.
type Conditions struct {
	// MinPromptTokens matches when the request's estimated prompt tokens
	// (llm.EstimatePromptTokens) are at least this many; MaxPromptTokens when at most.
	MinPromptTokens, MaxPromptTokens *int
	// Tools matches requests that do (true) or do not (false) define tools.
	Tools *bool
	// Images matches requests that do (true) or do not (false) carry an image part.
	Images *bool
	// Task matches the X-Gateway-Task header's value exactly; "" is no condition.
	Task string
	// LastUser is a regular expression (Go RE2 syntax) that must match somewhere in the text
	// of the last user message; "" is no condition.
	LastUser string
	// CEL is an expression that must evaluate to true; "" is no condition. See Env for what
	// it can read.
	CEL string
}

// Rule is one ordered rule: when When holds (nil: always), the request goes to Model.
type Rule struct {
	When  *Conditions
	Model string
}

// Route is a compiled route.
type Route struct {
	name  string
	rules []compiled
}

type compiled struct {
	c        Conditions
	lastUser *regexp.Regexp
	cel      cel.Program
	model    string
}

// RuleError is a problem with one rule: its index, the field ("when.cel", "model", ...) and
// what is wrong. New joins one per problem.
type RuleError struct {
	Rule  int
	Field string
	Msg   string
}

func (e *RuleError) Error() string { return fmt.Sprintf("rules[%d].%s: %s", e.Rule, e.Field, e.Msg) }

// New compiles a route. Every problem is reported (errors.Join of *RuleError): no rules, a
// rule without a model, a condition on the last rule or none on an earlier one (the rules
// after it could never match), a regular expression or a CEL expression that does not
// compile, a CEL expression that is not a bool.
func New(name string, rules []Rule) (*Route, error) {
	var errs []error
	bad := func(i int, field, format string, args ...any) {
		errs = append(errs, &RuleError{Rule: i, Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	if len(rules) == 0 {
		return nil, &RuleError{Rule: 0, Field: "", Msg: "a route needs at least one rule; the last one has no condition"}
	}
	r := &Route{name: name, rules: make([]compiled, len(rules))}
	for i, rule := range rules {
		c := &r.rules[i]
		c.model = strings.TrimSpace(rule.Model)
		if c.model == "" {
			bad(i, "model", "required: the model this rule sends requests to")
		}
		last := i == len(rules)-1
		switch {
		case last && rule.When != nil && !rule.When.empty():
			bad(i, "when", "the last rule must have no condition, so every request has a model")
		case !last && (rule.When == nil || rule.When.empty()):
			bad(i, "when", "only the last rule may have no condition (the rules after this one could never match)")
		}
		if rule.When == nil {
			continue
		}
		c.c = *rule.When
		if w := rule.When; w.MinPromptTokens != nil && w.MaxPromptTokens != nil && *w.MinPromptTokens > *w.MaxPromptTokens {
			bad(i, "when", "min_prompt_tokens (%d) is above max_prompt_tokens (%d): nothing can match", *w.MinPromptTokens, *w.MaxPromptTokens)
		}
		for _, f := range []struct {
			field string
			v     *int
		}{{"when.min_prompt_tokens", rule.When.MinPromptTokens}, {"when.max_prompt_tokens", rule.When.MaxPromptTokens}} {
			if f.v != nil && *f.v < 0 {
				bad(i, f.field, "must be 0 or more, got %d", *f.v)
			}
		}
		if rule.When.LastUser != "" {
			re, err := regexp.Compile(rule.When.LastUser)
			if err != nil {
				bad(i, "when.last_user", "not a valid regular expression: %v", err)
			}
			c.lastUser = re
		}
		if rule.When.CEL != "" {
			prg, err := compileCEL(rule.When.CEL)
			if err != nil {
				bad(i, "when.cel", "%v", err)
			}
			c.cel = prg
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return r, nil
}

func (w *Conditions) empty() bool { return *w == Conditions{} }

// Name is the route's client-facing model id.
func (r *Route) Name() string { return r.name }

// Models lists the models the rules name, in rule order, without repeats (the route's
// candidates in /v1/models).
func (r *Route) Models() []string {
	var out []string
	seen := map[string]bool{}
	for _, c := range r.rules {
		if !seen[c.model] {
			seen[c.model] = true
			out = append(out, c.model)
		}
	}
	return out
}

// Pick returns the model of the first rule that matches req, whose X-Gateway-Task header is
// task, and that rule's index. A CEL expression that fails at run time (a missing field, its
// cost limit) does not match: the next rule decides, and the last always matches.
func (r *Route) Pick(req *llm.Request, task string) (model string, rule int) {
	in := input{req: req, task: task, tokens: -1}
	for i := range r.rules {
		if r.rules[i].matches(&in) {
			return r.rules[i].model, i
		}
	}
	last := len(r.rules) - 1 // unreachable: New requires an unconditional last rule
	return r.rules[last].model, last
}

// input is one request as the rules see it, with what is costly computed once, when needed.
type input struct {
	req    *llm.Request
	task   string
	tokens int // -1 until estimated
	vars   map[string]any
}

func (in *input) promptTokens() int {
	if in.tokens < 0 {
		in.tokens = llm.EstimatePromptTokens(in.req)
	}
	return in.tokens
}

func (c *compiled) matches(in *input) bool {
	w := &c.c
	switch {
	case w.MinPromptTokens != nil && in.promptTokens() < *w.MinPromptTokens,
		w.MaxPromptTokens != nil && in.promptTokens() > *w.MaxPromptTokens,
		w.Tools != nil && *w.Tools != (len(in.req.Tools) > 0),
		w.Images != nil && *w.Images != in.req.HasImages(),
		w.Task != "" && w.Task != in.task,
		c.lastUser != nil && !c.lastUser.MatchString(in.req.LastUserText()):
		return false
	}
	return c.cel == nil || evalCEL(c.cel, in)
}
