package actors

import (
	"context"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/providers/llm"
)

// chatOnly is a backend without llm.Surface (a CLI kind, Anthropic).
type chatOnly struct{}

func (chatOnly) Open(context.Context, *llm.Request) (llm.Stream, error) { return nil, nil }

// surfaced serves the formats it lists.
type surfaced struct {
	chatOnly
	formats []llm.Format
}

func (s surfaced) Serves(f llm.Format) bool {
	for _, g := range s.formats {
		if g == f {
			return true
		}
	}
	return false
}

func TestRefusal(t *testing.T) {
	embed := func(texts ...string) *llm.Request {
		return &llm.Request{Embed: &llm.Embed{Texts: texts}, Native: &llm.Native{Format: llm.FormatEmbeddings}}
	}
	complete := &llm.Request{Native: &llm.Native{Format: llm.FormatCompletions}}
	chat := &llm.Request{}
	both := surfaced{formats: []llm.Format{llm.FormatEmbeddings, llm.FormatCompletions}}
	embedOnly := surfaced{formats: []llm.Format{llm.FormatEmbeddings}}
	for _, tc := range []struct {
		name    string
		typ     string
		window  int
		b       llm.Backend
		req     *llm.Request
		param   string // "" when served
		message string
	}{
		{"embeddings on an embedding model", llm.TypeEmbedding, 0, both, embed("a"), "", ""},
		{"embeddings on a chat model", llm.TypeChat, 0, both, embed("a"), "model", "not an embedding model"},
		{"embeddings on a CLI", llm.TypeChat, 0, chatOnly{}, embed("a"), "model", "(kind k) has no embeddings"},
		{"chat on an embedding model", llm.TypeEmbedding, 0, both, chat, "model", "serves only POST /v1/embeddings"},
		{"chat on a CLI", llm.TypeChat, 0, chatOnly{}, chat, "", ""},
		{"completions served", llm.TypeChat, 0, both, complete, "", ""},
		{"completions not served", llm.TypeChat, 0, embedOnly, complete, "model", "has no legacy completions"},
		{"completions on an embedding model", llm.TypeEmbedding, 0, both, complete, "model", "embedding model"},
		{"input within the window", llm.TypeEmbedding, 4, both, embed("1234567890123456"), "", ""},
		{"input over the window", llm.TypeEmbedding, 4, both, embed("ok", "12345678901234567"), "input[1]", "about 5 tokens"},
		{"unknown window", llm.TypeEmbedding, 0, both, embed(strings.Repeat("x", 1<<20)), "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := refusal("p/m", "k", tc.typ, tc.window, tc.b, tc.req)
			switch {
			case tc.param == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.param == "":
			case err == nil:
				t.Fatalf("served, want refused naming %s", tc.param)
			case err.Kind != llm.KindInvalidRequest || err.Param != tc.param || !strings.Contains(err.Message, tc.message):
				t.Fatalf("got %v (param %q), want invalid_request naming %q saying %q", err, err.Param, tc.param, tc.message)
			}
		})
	}
}

// TestEstimateEmbeddings: 2,048 inputs in one embeddings call are charged all their estimated
// tokens, not the model's window, and nothing for output.
func TestEstimateEmbeddings(t *testing.T) {
	texts := make([]string, 2048)
	for i := range texts {
		texts[i] = "12345678" // 2 tokens each
	}
	req := &llm.Request{Embed: &llm.Embed{Texts: texts}, Native: &llm.Native{Format: llm.FormatEmbeddings}}
	g := &Gateway{}
	if got := g.estimate(&route{counts: true, window: 512}, req); got != 4096 {
		t.Fatalf("charged %d, want 4096", got)
	}
	if got := g.estimate(&route{counts: false, window: 512}, req); got != 0 {
		t.Fatalf("charged %d where no bucket counts tokens", got)
	}
}
