package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tollgate/tollgate/cmd/internal/fakellm"
)

// Every kind with embeddings (SPEC §19), each a provider named for its kind, in front of one
// fakellm, with an embedding model and a chat model; anthropic has neither embeddings nor
// legacy completions.
var (
	embeddingKinds   = []string{"openai", "nvidia", "qwen", "doubao", "ernie", "lmstudio", "ollama", "gemini"}
	completionsKinds = []string{"openai", "deepseek", "lmstudio", "ollama", "nvidia"}
)

func surfaceConfig(url string) string {
	var b strings.Builder
	b.WriteString("limits: {retry_after: 2s}\nproviders:\n")
	kinds := map[string]bool{}
	for _, k := range append(append([]string{}, embeddingKinds...), completionsKinds...) {
		if kinds[k] {
			continue
		}
		kinds[k] = true
		base := url + "/v1"
		if k == "gemini" {
			base = url + "/v1beta"
		}
		fmt.Fprintf(&b, "  - name: %[1]s\n    kind: %[1]s\n    base_url: %[2]s\n    keys: [test-key]\n    models:\n      - {id: embed-model, type: embedding, context_window: 64}\n      - {id: fake-model}\n", k, base)
	}
	fmt.Fprintf(&b, "  - name: ant\n    kind: anthropic\n    base_url: %s\n    keys: [test-key]\n    models: [{id: fake-model}]\n", url)
	return b.String()
}

func startSurface(t *testing.T, opts fakellm.Options) (*gateway, *fakellm.Server) {
	t.Helper()
	fake := fakellm.New(opts)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	return startGateway(t, surfaceConfig(srv.URL), nil), fake
}

// TestEmbeddingsSDK: openai-go's embeddings.create, which asks for base64 unless told
// otherwise, gets one vector per input from every kind that has embeddings, translated back
// from Gemini's own API, with the SPEC §3 headers.
func TestEmbeddingsSDK(t *testing.T) {
	g, _ := startSurface(t, fakellm.Options{})
	c := sdkClient(g.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, kind := range embeddingKinds {
		t.Run(kind, func(t *testing.T) {
			model := kind + "/embed-model"
			for _, format := range []oai.EmbeddingNewParamsEncodingFormat{"", oai.EmbeddingNewParamsEncodingFormatFloat, oai.EmbeddingNewParamsEncodingFormatBase64} {
				var resp *http.Response
				p := oai.EmbeddingNewParams{Model: model, EncodingFormat: format,
					Input: oai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"alpha", "beta", "alpha"}}}
				res, err := c.Embeddings.New(ctx, p, option.WithResponseInto(&resp))
				if err != nil {
					t.Fatalf("format %q: %v", format, err)
				}
				if len(res.Data) != 3 || len(res.Data[0].Embedding) != fakellm.EmbeddingDims {
					t.Fatalf("format %q: %d vectors of %d", format, len(res.Data), len(res.Data[0].Embedding))
				}
				if !equalVectors(res.Data[0].Embedding, res.Data[2].Embedding) || equalVectors(res.Data[0].Embedding, res.Data[1].Embedding) {
					t.Fatalf("format %q: equal inputs must embed equally, different ones differently: %v", format, res.Data)
				}
				if resp.Header.Get("X-Gateway-Model") != model || resp.Header.Get("X-Gateway-Queue-Ms") == "" {
					t.Fatalf("headers %v", resp.Header)
				}
			}
			one, err := c.Embeddings.New(ctx, oai.EmbeddingNewParams{Model: model, Dimensions: oai.Int(4),
				Input: oai.EmbeddingNewParamsInputUnion{OfString: oai.String("gamma")}})
			if err != nil {
				t.Fatal(err)
			}
			if len(one.Data) != 1 || len(one.Data[0].Embedding) != 4 {
				t.Fatalf("dimensions 4: %+v", one.Data)
			}
		})
	}
	g.waitIdle(t)
}

func equalVectors(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestEmbeddingsRefused: the wrong type of model, a backend without embeddings and bad
// input are 400 invalid_request naming the model or the field, as the SDK reports them.
func TestEmbeddingsRefused(t *testing.T) {
	g, _ := startSurface(t, fakellm.Options{})
	c := sdkClient(g.URL)
	ctx := context.Background()
	long := strings.Repeat("word ", 100) // about 125 tokens, over the window of 64
	for _, tc := range []struct {
		name, model, param, says string
		input                    oai.EmbeddingNewParamsInputUnion
	}{
		{"chat model", "openai/fake-model", "model", "not an embedding model", oai.EmbeddingNewParamsInputUnion{OfString: oai.String("x")}},
		{"no embeddings", "ant/fake-model", "model", "has no embeddings", oai.EmbeddingNewParamsInputUnion{OfString: oai.String("x")}},
		{"empty", "openai/embed-model", "input", "empty", oai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{}}},
		{"too long", "openai/embed-model", "input[1]", "context_window 64", oai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"ok", long}}},
		{"gemini tokens", "gemini/embed-model", "input", "token arrays", oai.EmbeddingNewParamsInputUnion{OfArrayOfTokenArrays: [][]int64{{1, 2}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Embeddings.New(ctx, oai.EmbeddingNewParams{Model: tc.model, Input: tc.input})
			var ae *oai.Error
			if !errors.As(err, &ae) || ae.StatusCode != 400 || ae.Code != "invalid_request" || ae.Param != tc.param || !strings.Contains(ae.Message, tc.says) {
				t.Fatalf("got %v, want 400 invalid_request param %q saying %q", err, tc.param, tc.says)
			}
		})
	}
	// An embedding model asked for chat.
	_, err := c.Chat.Completions.New(ctx, userParams("openai/embed-model"))
	var ae *oai.Error
	if !errors.As(err, &ae) || ae.StatusCode != 400 || !strings.Contains(ae.Message, "embedding model") {
		t.Fatalf("chat on an embedding model: %v", err)
	}
}

// TestCompletionsSDK: openai-go's completions.create, whole and streamed, with a suffix,
// through every kind that serves legacy completions; others are refused 400.
func TestCompletionsSDK(t *testing.T) {
	g, fake := startSurface(t, fakellm.Options{Reply: "return a + b", Chunks: 3})
	c := sdkClient(g.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, kind := range completionsKinds {
		t.Run(kind, func(t *testing.T) {
			p := oai.CompletionNewParams{Model: oai.CompletionNewParamsModel(kind + "/fake-model"),
				Prompt: oai.CompletionNewParamsPromptUnion{OfString: oai.String("def add(a, b):\n    ")},
				Suffix: oai.String("\n\nprint(add(1, 2))"), MaxTokens: oai.Int(64)}
			res, err := c.Completions.New(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Choices) != 1 || res.Choices[0].Text != "return a + b" || res.Choices[0].FinishReason != "stop" || res.Usage.CompletionTokens == 0 {
				t.Fatalf("whole: %+v", res)
			}
			p.StreamOptions = oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)}
			s := c.Completions.NewStreaming(ctx, p)
			var text strings.Builder
			usage := false
			for s.Next() {
				ch := s.Current()
				for _, choice := range ch.Choices {
					text.WriteString(choice.Text)
				}
				usage = usage || ch.Usage.TotalTokens > 0
			}
			if err := s.Err(); err != nil || text.String() != "return a + b" || !usage {
				t.Fatalf("stream: %q usage %v err %v", text.String(), usage, err)
			}
		})
	}
	for _, model := range []string{"qwen/fake-model", "ant/fake-model", "gemini/fake-model", "openai/embed-model"} {
		_, err := c.Completions.New(ctx, oai.CompletionNewParams{Model: oai.CompletionNewParamsModel(model),
			Prompt: oai.CompletionNewParamsPromptUnion{OfString: oai.String("x")}})
		var ae *oai.Error
		if !errors.As(err, &ae) || ae.StatusCode != 400 || ae.Code != "invalid_request" || ae.Param != "model" {
			t.Fatalf("%s: %v, want 400 invalid_request naming the model", model, err)
		}
	}
	g.waitIdle(t)
	if st := fake.Stats(); st.ClientGone != 0 {
		t.Fatalf("fakellm saw %d calls cut off", st.ClientGone)
	}
}

// TestSurfaceNodeSDK: the pinned Node openai SDK's embeddings.create (base64, decoded by the
// SDK) and completions.create, whole and streamed, against every kind that has them.
func TestSurfaceNodeSDK(t *testing.T) {
	node, modules := nodeClients(t)
	g, _ := startSurface(t, fakellm.Options{Reply: "return a + b", Chunks: 3})
	lines := runScript(t, node, modules, "surface.mjs", &conformanceEnv{gw: g, vars: []string{
		"TOLLGATE_EMBEDDINGS=" + strings.Join(embeddingKinds, ","), "TOLLGATE_COMPLETIONS=" + strings.Join(completionsKinds, ",")}})
	for _, kind := range embeddingKinds {
		l, ok := lines["surface/embeddings/"+kind]
		if !ok || l.obs["error"] != nil || l.obs["vectors"] != 3.0 || l.obs["dims"] != float64(fakellm.EmbeddingDims) ||
			l.obs["same"] != true || l.obs["differ"] != true {
			t.Errorf("embeddings/%s: %v", kind, l.obs)
		}
	}
	for _, kind := range completionsKinds {
		l, ok := lines["surface/completions/"+kind]
		if !ok || l.obs["whole"] != "return a + b" || l.obs["streamed"] != "return a + b" || l.obs["finish_reason"] != "stop" {
			t.Errorf("completions/%s: %v", kind, l.obs)
		}
	}
	e, _ := lines["surface/embeddings/chat-model"].obs["error"].(map[string]any)
	if e == nil || e["status"] != 400.0 || e["code"] != "invalid_request" {
		t.Errorf("embeddings on a chat model: %v", lines["surface/embeddings/chat-model"].obs)
	}
}
