package route

import (
	"fmt"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/ext"
)

// celCostLimit bounds one evaluation. Expressions come from the config, not from clients,
// but a comprehension over a long conversation still must not stall admission; past the
// limit the expression fails, which does not match.
const celCostLimit = 100_000

// The variables a CEL condition can read:
//
//	request        map: model (string), messages (list of maps: role, content — the
//	               message's text — and name), tools (list of maps: name, description),
//	               stream (bool), max_tokens (int, 0 when unset), temperature (double, -1
//	               when unset), has_images (bool)
//	task           string: the X-Gateway-Task header ("" when absent)
//	prompt_tokens  int: the estimated prompt tokens
//	last_user      string: the text of the last user message
//
// CEL's standard functions and its strings extension (lowerAscii, split, join, ...) are
// available. For example `request.messages.size() > 20`, `task == "summarize" && prompt_tokens > 8000`,
// `request.tools.exists(t, t.name == "browser")`.
var celEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("request", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("task", cel.StringType),
		cel.Variable("prompt_tokens", cel.IntType),
		cel.Variable("last_user", cel.StringType),
		ext.Strings(), // join, lowerAscii, split, ...: what conditions on text need
	)
})

// compileCEL checks expr and returns its program; the error says what is wrong, with the
// position inside the expression.
func compileCEL(expr string) (cel.Program, error) {
	env, err := celEnv()
	if err != nil {
		return nil, fmt.Errorf("CEL environment: %w", err)
	}
	ast, iss := env.Compile(expr)
	if iss != nil && iss.Err() != nil {
		return nil, fmt.Errorf("not a valid CEL expression: %s", describe(iss))
	}
	if t := ast.OutputType(); t != cel.BoolType && t != cel.DynType {
		return nil, fmt.Errorf("the CEL expression must be true or false, it gives a %s", t)
	}
	prg, err := env.Program(ast, cel.CostLimit(celCostLimit))
	if err != nil {
		return nil, fmt.Errorf("CEL program: %w", err)
	}
	return prg, nil
}

// describe is the first problem CEL found, with its column, on one line (CEL's own report
// spans lines: the message, the expression, a caret); "and N more" counts the rest.
func describe(iss *cel.Issues) string {
	errs := iss.Errors()
	if len(errs) == 0 {
		return strings.Join(strings.Fields(iss.Err().Error()), " ")
	}
	e := errs[0]
	s := fmt.Sprintf("column %d: %s", e.Location.Column()+1, e.Message)
	if len(errs) > 1 {
		s += fmt.Sprintf(" (and %d more)", len(errs)-1)
	}
	return s
}

// evalCEL runs prg on the request; only a true bool matches.
func evalCEL(prg cel.Program, in *input) bool {
	if in.vars == nil {
		in.vars = celVars(in)
	}
	v, _, err := prg.Eval(in.vars)
	if err != nil {
		return false
	}
	b, ok := v.Value().(bool)
	return ok && b
}

func celVars(in *input) map[string]any {
	r := in.req
	msgs := make([]any, len(r.Messages))
	for i := range r.Messages {
		m := &r.Messages[i]
		msgs[i] = map[string]any{"role": m.Role, "content": m.Content.PlainText(), "name": m.Name}
	}
	tools := make([]any, len(r.Tools))
	for i, t := range r.Tools {
		tools[i] = map[string]any{"name": t.Function.Name, "description": t.Function.Description}
	}
	temperature := -1.0
	if r.Temperature != nil {
		temperature = *r.Temperature
	}
	return map[string]any{
		"request": map[string]any{
			"model": r.Model, "messages": msgs, "tools": tools, "stream": r.Stream,
			"max_tokens": int64(r.OutputLimit()), "temperature": temperature, "has_images": r.HasImages(),
		},
		"task":          in.task,
		"prompt_tokens": int64(in.promptTokens()),
		"last_user":     r.LastUserText(),
	}
}
