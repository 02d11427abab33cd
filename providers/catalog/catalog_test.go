package catalog

import (
	"strings"
	"testing"

	"github.com/tollgate/tollgate/providers/llm"
)

func TestLookup(t *testing.T) {
	for _, tt := range []struct {
		name string // as a backend or client spells it
		want string // the entry's canonical name; "" = unknown
		ctx  int
		out  int
	}{
		{"gpt-4o", "gpt-4o", 128000, 16384},
		{"gpt-4o-2024-08-06", "gpt-4o", 128000, 16384},
		{"gpt-4o-2024-05-13", "gpt-4o-2024-05-13", 128000, 4096}, // exact beats snapshot
		{"gpt-4o-mini-2024-07-18", "gpt-4o-mini", 128000, 16384},
		{"gpt-4o-mini-tts", "", 0, 0}, // a word names another model
		{"GPT-4.1", "gpt-4.1", 1047576, 32768},
		{"gpt-5-2025-08-07", "gpt-5", 400000, 128000},
		{"gpt-5-chat-latest", "", 0, 0},
		{"o1-preview-2024-09-12", "o1-preview", 128000, 32768}, // longest name wins
		{"o3-mini-2025-01-31", "o3-mini", 200000, 100000},
		{"gpt-3.5-turbo-0125", "gpt-3.5-turbo", 16385, 4096},
		{"claude-sonnet-4-20250514", "claude-sonnet-4", 200000, 64000},
		{"claude-sonnet-4-5-20250929", "claude-sonnet-4-5", 200000, 64000},
		{"claude-sonnet-4-6", "", 0, 0}, // a new version, not a snapshot
		{"claude-3-5-sonnet-latest", "claude-3-5-sonnet", 200000, 8192},
		{"claude-opus-4-0", "claude-opus-4", 200000, 32000}, // an alias
		{"models/gemini-2.5-pro", "gemini-2.5-pro", 1048576, 65536},
		{"gemini-2.5-flash-preview-05-20", "gemini-2.5-flash", 1048576, 65536},
		{"gemini-2.5-flash-lite-preview-06-17", "gemini-2.5-flash-lite", 1048576, 65536},
		{"gemini-2.5-flash-image-preview", "", 0, 0},
		{"gemini-1.5-pro-002", "gemini-1.5-pro", 2097152, 8192},
		{"meta/llama-3.3-70b-instruct", "llama-3.3-70b-instruct", 131072, 0}, // NVIDIA id
		{"nvidia/llama-3.3-nemotron-super-49b-v1", "llama-3.3-nemotron-super-49b-v1", 131072, 0},
		{"lmstudio-community/Meta-Llama-3.1-8B-Instruct", "llama-3.1-8b-instruct", 131072, 0},
		{"qwen2.5-7b-instruct@q4_k_m", "qwen2.5-7b-instruct", 131072, 8192}, // LM Studio quantisation
		{"gpt-oss:20b", "gpt-oss-20b", 131072, 0},                           // Ollama tag
		{"deepseek-ai/deepseek-r1", "deepseek-r1", 0, 0},
		{"deepseek-r1-distill-qwen-7b", "", 0, 0},
		{"  deepseek-chat ", "deepseek-chat", 0, 0},
		{"echo", "", 0, 0},
		{"", "", 0, 0},
		{"gpt-4o-", "", 0, 0},
		{"gpt-4o--", "", 0, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, ok := Lookup(tt.name)
			if ok != (tt.want != "") || e.Name != tt.want || e.ContextWindow != tt.ctx || e.MaxOutputTokens != tt.out {
				t.Fatalf("Lookup(%q) = %+v %v, want %q ctx %d out %d", tt.name, e, ok, tt.want, tt.ctx, tt.out)
			}
		})
	}
}

func TestCapabilities(t *testing.T) {
	str := func(b *bool) string {
		if b == nil {
			return "?"
		}
		if *b {
			return "y"
		}
		return "n"
	}
	for name, want := range map[string]string{ // reasoning, tools, vision
		"o3":                            "yyy",
		"gpt-4o":                        "nyy",
		"gpt-3.5-turbo":                 "nyn",
		"claude-haiku-4-5":              "yyy",
		"claude-3-5-haiku":              "ny?",
		"gemini-2.0-flash":              "?yy",
		"deepseek-reasoner":             "y?n",
		"qwen3-32b":                     "yyn",
		"llama-3.2-11b-vision-instruct": "n?y",
	} {
		e, ok := Lookup(name)
		if got := str(e.Reasoning) + str(e.Tools) + str(e.Vision); !ok || got != want {
			t.Errorf("%s: %s (known %v), want %s", name, got, ok, want)
		}
	}
}

func TestFill(t *testing.T) {
	cw, f := 4096, false
	s := llm.Spec{ContextWindow: &cw, Vision: &f}
	if !Fill(&s, "gpt-4o") {
		t.Fatal("gpt-4o unknown")
	}
	if *s.ContextWindow != 4096 || *s.Vision {
		t.Errorf("known values overwritten: ctx %d vision %v", *s.ContextWindow, *s.Vision)
	}
	if s.MaxOutputTokens == nil || *s.MaxOutputTokens != 16384 || s.Tools == nil || !*s.Tools || s.Reasoning == nil || *s.Reasoning {
		t.Errorf("unknown values not filled: %+v", s)
	}

	var u llm.Spec
	if Fill(&u, "my-finetune") || u.ContextWindow != nil || u.MaxOutputTokens != nil || u.Reasoning != nil || u.Tools != nil || u.Vision != nil {
		t.Errorf("an unknown model filled %+v", u)
	}
	var d llm.Spec
	Fill(&d, "deepseek-chat") // known capabilities, unknown limits: the limits stay null
	if d.ContextWindow != nil || d.MaxOutputTokens != nil || d.Tools == nil {
		t.Errorf("deepseek-chat: %+v", d)
	}
	// Two fills share no memory: a card edited later does not change the catalog.
	var a, b llm.Spec
	Fill(&a, "o3")
	Fill(&b, "o3")
	*a.ContextWindow = 1
	if *b.ContextWindow != 200000 {
		t.Error("filled specs share their numbers")
	}
}

func TestTable(t *testing.T) {
	for _, r := range table {
		for _, n := range r.names {
			if n != normalise(n) {
				t.Errorf("%q is not in normal form (%q): Lookup could never find it", n, normalise(n))
			}
		}
		if r.output > r.context && r.context > 0 {
			t.Errorf("%s: output %d above context %d", r.names[0], r.output, r.context)
		}
	}
}

// FuzzLookup checks the matching rules hold for any name: a match is its entry's name or
// alias or a snapshot of one, and neither case nor an organisation path changes the answer.
func FuzzLookup(f *testing.F) {
	for _, s := range []string{"gpt-4o-2024-08-06", "models/gemini-2.5-pro", "a/b/c", "x@y:z", "-", "o1--", "claude-opus-4-1-v2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		e, ok := Lookup(name)
		if !ok {
			if e != (Entry{}) {
				t.Fatalf("unknown %q returned %+v", name, e)
			}
			return
		}
		r := byName[e.Name]
		if r == nil {
			t.Fatalf("%q matched %q, not a table name", name, e.Name)
		}
		n := normalise(name)
		matched := false
		for _, alias := range r.names {
			matched = matched || n == alias || (strings.HasPrefix(n, alias+"-") && snapshot(n[len(alias)+1:]))
		}
		if !matched {
			t.Fatalf("%q (normalised %q) matched %q by no rule", name, n, e.Name)
		}
		if e2, ok2 := Lookup("org/" + strings.ToUpper(n)); !ok2 || e2.Name != e.Name {
			t.Fatalf("%q and its upper-case, org-prefixed form differ: %q, %q", name, e.Name, e2.Name)
		}
	})
}

func TestListPrice(t *testing.T) {
	for _, tc := range []struct {
		model string
		want  Price
		ok    bool
	}{
		{"gpt-4.1", Price{2, 0.5, 8}, true},
		{"gpt-4o-2024-08-06", Price{2.5, 1.25, 10}, true}, // a snapshot costs what its model does
		{"claude-sonnet-4-5-20250929", Price{3, 0.3, 15}, true},
		{"llama-3.3-70b-instruct", Price{}, false}, // open weights: the host sets the price
		{"no-such-model", Price{}, false},
	} {
		if got, ok := ListPrice(tc.model); got != tc.want || ok != tc.ok {
			t.Errorf("ListPrice(%q) = %v %v, want %v %v", tc.model, got, ok, tc.want, tc.ok)
		}
	}
	for name := range prices {
		if e, ok := Lookup(name); !ok || e.Name != name {
			t.Errorf("priced model %q is not a catalog entry of that name", name)
		}
	}
}
