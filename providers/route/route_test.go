package route

import (
	"errors"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/providers/llm"
)

func ptr[T any](v T) *T { return &v }

func user(text string) llm.Message {
	return llm.Message{Role: "user", Content: llm.Content{Text: text}}
}

// support is the SPEC §8 example route, plus the other conditions.
var support = []Rule{
	{When: &Conditions{Task: "translate"}, Model: "qwen/qwen-mt"},
	{When: &Conditions{Images: ptr(true)}, Model: "openai/gpt-4.1"},
	{When: &Conditions{LastUser: `(?i)\b(stack trace|panic:)`}, Model: "deepseek/deepseek-coder"},
	{When: &Conditions{MaxPromptTokens: ptr(2000), Tools: ptr(false)}, Model: "deepseek/deepseek-chat"},
	{When: &Conditions{CEL: `request.messages.size() > 20`}, Model: "openai/gpt-4.1"},
	{When: &Conditions{MinPromptTokens: ptr(50000)}, Model: "gemini/gemini-2.5-pro"},
	{Model: "openai/gpt-4.1-mini"},
}

func TestPick(t *testing.T) {
	r, err := New("support", support)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("word ", 4000) // ~5000 tokens
	many := make([]llm.Message, 0, 22)
	for range 11 {
		many = append(many, user(long), llm.Message{Role: "assistant", Content: llm.Content{Text: "ok"}})
	}
	img := llm.Message{Role: "user", Content: llm.Content{Parts: []llm.Part{{Type: "text", Text: "what is this"},
		{Type: "image_url", ImageURL: &llm.ImageURL{URL: "https://example.invalid/x.png"}}}}}
	tool := []llm.Tool{{Type: "function", Function: llm.ToolFunction{Name: "search"}}}
	tests := []struct {
		name     string
		req      llm.Request
		task     string
		want     string
		wantRule int
	}{
		{"a short prompt goes to the cheap model", llm.Request{Messages: []llm.Message{user("hi")}}, "", "deepseek/deepseek-chat", 3},
		{"the task header first", llm.Request{Messages: []llm.Message{user("hi")}}, "translate", "qwen/qwen-mt", 0},
		{"another task value does not match", llm.Request{Messages: []llm.Message{user("hi")}}, "summarize", "deepseek/deepseek-chat", 3},
		{"images", llm.Request{Messages: []llm.Message{img}}, "", "openai/gpt-4.1", 1},
		{"regex on the last user message", llm.Request{Messages: []llm.Message{user("here: PANIC: nil map"), {Role: "assistant"}}}, "", "deepseek/deepseek-coder", 2},
		{"regex only on the last user message", llm.Request{Messages: []llm.Message{user("panic: x"), user("thanks")}}, "", "deepseek/deepseek-chat", 3},
		{"tools skip the cheap rule", llm.Request{Messages: []llm.Message{user("hi")}, Tools: tool}, "", "openai/gpt-4.1-mini", 6},
		{"CEL on the conversation length", llm.Request{Messages: many}, "", "openai/gpt-4.1", 4},
		{"a long prompt goes to the big model", llm.Request{Messages: []llm.Message{user(strings.Repeat(long, 11))}}, "", "gemini/gemini-2.5-pro", 5},
		{"otherwise the last rule", llm.Request{Messages: []llm.Message{user(long)}}, "", "openai/gpt-4.1-mini", 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, rule := r.Pick(&tt.req, tt.task)
			if got != tt.want || rule != tt.wantRule {
				t.Errorf("Pick = %s (rule %d), want %s (rule %d); prompt tokens %d", got, rule, tt.want, tt.wantRule, llm.EstimatePromptTokens(&tt.req))
			}
		})
	}
	if m := r.Models(); strings.Join(m, ",") != "qwen/qwen-mt,openai/gpt-4.1,deepseek/deepseek-coder,deepseek/deepseek-chat,gemini/gemini-2.5-pro,openai/gpt-4.1-mini" {
		t.Errorf("Models = %v", m)
	}
}

func TestCELVariables(t *testing.T) {
	tests := []struct {
		expr string
		want bool
	}{
		{`task == "code" && prompt_tokens < 100`, true},
		{`request.tools.exists(t, t.name == "browser")`, true},
		{`request.stream && request.max_tokens == 64`, true},
		{`request.temperature == -1.0`, true},
		{`last_user.contains("docs")`, true},
		{`request.messages[0].role == "system"`, true},
		{`request.has_images`, false},
		{`request.nope == 1`, false}, // a missing key fails at run time: no match
		{`request.messages.map(m, m.content).join("").size() > 1000000`, false},
	}
	req := llm.Request{Model: "support", Stream: true, MaxTokens: ptr(64),
		Messages: []llm.Message{{Role: "system", Content: llm.Content{Text: "be brief"}}, user("read the docs")},
		Tools:    []llm.Tool{{Type: "function", Function: llm.ToolFunction{Name: "browser"}}}}
	for _, tt := range tests {
		r, err := New("r", []Rule{{When: &Conditions{CEL: tt.expr}, Model: "a/yes"}, {Model: "a/no"}})
		if err != nil {
			t.Fatalf("%s: %v", tt.expr, err)
		}
		if got, _ := r.Pick(&req, "code"); (got == "a/yes") != tt.want {
			t.Errorf("%s: picked %s, want match %v", tt.expr, got, tt.want)
		}
	}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name  string
		rules []Rule
		want  []string
	}{
		{"no rules", nil, []string{"at least one rule"}},
		{"last rule has a condition", []Rule{{When: &Conditions{Task: "x"}, Model: "a/b"}}, []string{"rules[0].when: the last rule must have no condition"}},
		{"an earlier rule has none", []Rule{{Model: "a/b"}, {Model: "a/c"}}, []string{"rules[0].when: only the last rule may have no condition"}},
		{"empty when is no condition", []Rule{{When: &Conditions{}, Model: "a/b"}, {Model: "a/c"}}, []string{"rules[0].when: only the last rule"}},
		{"missing model", []Rule{{When: &Conditions{Task: "x"}}, {Model: " "}}, []string{"rules[0].model: required", "rules[1].model: required"}},
		{"bad regex", []Rule{{When: &Conditions{LastUser: "(unclosed"}, Model: "a/b"}, {Model: "a/c"}}, []string{"rules[0].when.last_user: not a valid regular expression: error parsing regexp: missing closing ): `(unclosed`"}},
		{"bad CEL", []Rule{{When: &Conditions{CEL: "request.messages.size( > 2"}, Model: "a/b"}, {Model: "a/c"}}, []string{"rules[0].when.cel: not a valid CEL expression: column 24: Syntax error"}},
		{"unknown CEL variable", []Rule{{When: &Conditions{CEL: "reqest.model == 'x'"}, Model: "a/b"}, {Model: "a/c"}}, []string{"rules[0].when.cel: not a valid CEL expression:", "undeclared reference to 'reqest'"}},
		{"CEL not a bool", []Rule{{When: &Conditions{CEL: "prompt_tokens + 1"}, Model: "a/b"}, {Model: "a/c"}}, []string{"rules[0].when.cel: the CEL expression must be true or false, it gives a int"}},
		{"thresholds", []Rule{{When: &Conditions{MinPromptTokens: ptr(10), MaxPromptTokens: ptr(5)}, Model: "a/b"}, {When: &Conditions{MaxPromptTokens: ptr(-1)}, Model: "a/b"}, {Model: "a/c"}},
			[]string{"rules[0].when: min_prompt_tokens (10) is above max_prompt_tokens (5)", "rules[1].when.max_prompt_tokens: must be 0 or more, got -1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New("r", tt.rules)
			if err == nil {
				t.Fatal("no error")
			}
			if _, ok := errors.AsType[*RuleError](err); !ok {
				t.Errorf("%v is not a *RuleError", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// FuzzPick: whatever the request and task, Pick returns one of the route's models, the rule
// it names says so, and the unconditional last rule catches the rest.
func FuzzPick(f *testing.F) {
	f.Add("hello", "", 0, false, false)
	f.Add("panic: x", "translate", 3, true, true)
	f.Add("你好 🎉 "+strings.Repeat("x", 9000), "code", 30, false, true)
	r, err := New("support", support)
	if err != nil {
		f.Fatal(err)
	}
	models := map[string]bool{}
	for _, m := range r.Models() {
		models[m] = true
	}
	f.Fuzz(func(t *testing.T, text, task string, n int, tools, image bool) {
		req := llm.Request{}
		for range n % 40 {
			req.Messages = append(req.Messages, user(text))
		}
		if image {
			req.Messages = append(req.Messages, llm.Message{Role: "user", Content: llm.Content{Parts: []llm.Part{{Type: "image_url", ImageURL: &llm.ImageURL{URL: text}}}}})
		}
		if tools {
			req.Tools = []llm.Tool{{Type: "function", Function: llm.ToolFunction{Name: text}}}
		}
		got, rule := r.Pick(&req, task)
		if !models[got] || rule < 0 || rule >= len(support) || support[rule].Model != got {
			t.Fatalf("Pick = %q rule %d", got, rule)
		}
	})
}
