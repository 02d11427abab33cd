package openai

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/providers/llm"
)

// surfaceDir holds the embeddings and legacy completions cases (docs/surface-protocols.md):
// <kind>/<case>.in.json is the client's call, <case>.http the backend's documented answer,
// <case>.golden.jsonl the path and body the backend received, then what the gateway sees.
const surfaceDir = "../../testdata/openai-surface"

func TestSurfaceGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(surfaceDir, "*", "*.in.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no cases under %s (%v)", surfaceDir, err)
	}
	for _, in := range files {
		kind := filepath.Base(filepath.Dir(in))
		base := trimExt(in, ".in.json")
		t.Run(kind+"/"+filepath.Base(base), func(t *testing.T) {
			req := surfaceRequest(t, in)
			status, h, body := readHTTPFixture(t, base+".http")
			type sent struct {
				Path string          `json:"path"`
				Sent json.RawMessage `json:"sent"`
			}
			got := make(chan sent, 1)
			srv := replayServer(t, status, h, body, 7)
			inner := srv.Config.Handler
			srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				got <- sent{r.URL.Path, b}
				r.Body = io.NopCloser(strings.NewReader(""))
				inner.ServeHTTP(w, r)
			})
			c := newTestClient(t, kind, srv.URL+"/v1", "sk-test-secret")
			if !c.Serves(req.Op()) {
				t.Fatalf("kind %s does not serve %s", kind, req.Op())
			}
			events := collect(t, c, req)
			first := <-got
			out, err := json.Marshal(first)
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, base+".golden.jsonl", append(append(out, '\n'), encodeLines(t, events)...))
		})
	}
}

// surfaceRequest reads a case's call as the HTTP layer would make it.
func surfaceRequest(t *testing.T, path string) *llm.Request {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tc struct {
		Format string          `json:"format"` // embeddings or completions
		Model  string          `json:"model"`
		Base64 bool            `json:"base64"`
		Client json.RawMessage `json:"client"`
	}
	if err := json.Unmarshal(raw, &tc); err != nil {
		t.Fatal(err)
	}
	req := &llm.Request{Model: tc.Model, Body: tc.Client}
	switch tc.Format {
	case "embeddings":
		req.Native = &llm.Native{Format: llm.FormatEmbeddings, Body: tc.Client}
		req.Embed = &llm.Embed{Base64: tc.Base64}
		var in struct {
			Input json.RawMessage `json:"input"`
		}
		_ = json.Unmarshal(tc.Client, &in)
		var one string
		var texts []string
		var tokens [][]int
		switch {
		case json.Unmarshal(in.Input, &one) == nil:
			req.Embed.Texts = []string{one}
		case json.Unmarshal(in.Input, &texts) == nil:
			req.Embed.Texts = texts
		case json.Unmarshal(in.Input, &tokens) == nil:
			req.Embed.Tokens = tokens
		default:
			t.Fatalf("%s: input %s", path, in.Input)
		}
	case "completions":
		var c struct {
			Stream bool `json:"stream"`
		}
		_ = json.Unmarshal(tc.Client, &c)
		req.Stream = c.Stream
		req.Native = &llm.Native{Format: llm.FormatCompletions, Body: tc.Client}
	default:
		t.Fatalf("%s: format %q", path, tc.Format)
	}
	return req
}

func TestServes(t *testing.T) {
	for kind, want := range map[string][2]bool{
		KindOpenAI: {true, true}, KindDeepSeek: {false, true}, KindQwen: {true, false}, KindDoubao: {true, false},
		KindErnie: {true, false}, KindNvidia: {true, true}, KindLMStudio: {true, true}, KindOllama: {true, true},
	} {
		c := newTestClient(t, kind, "http://127.0.0.1:1/v1")
		if got := [2]bool{c.Serves(llm.FormatEmbeddings), c.Serves(llm.FormatCompletions)}; got != want {
			t.Errorf("%s serves embeddings, completions: %v, want %v", kind, got, want)
		}
		if c.Serves(llm.FormatChat) || c.Serves(llm.FormatResponses) {
			t.Errorf("%s claims a chat format as standalone", kind)
		}
	}
}

// TestListEmbeddingModels: LM Studio's own listing says which models embed
// (lmstudio.ai/docs/app/api/endpoints/rest, GET /api/v0/models); a server that has no such
// listing leaves every model a chat model.
func TestListEmbeddingModels(t *testing.T) {
	for _, v0 := range []bool{true, false} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case r.URL.Path == "/v1/models":
				_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"qwen2.5-7b-instruct","object":"model","owned_by":"organization_owner"},`+
					`{"id":"text-embedding-nomic-embed-text-v1.5","object":"model","owned_by":"organization_owner"}]}`)
			case r.URL.Path == "/api/v0/models" && v0:
				_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"qwen2.5-7b-instruct","object":"model","type":"llm","state":"loaded","max_context_length":32768},`+
					`{"id":"text-embedding-nomic-embed-text-v1.5","object":"model","type":"embeddings","state":"not-loaded","max_context_length":2048}]}`)
			default:
				http.NotFound(w, r)
			}
		}))
		c := newTestClient(t, KindLMStudio, srv.URL+"/v1")
		models, err := c.ListModels(t.Context())
		srv.Close()
		if err != nil {
			t.Fatal(err)
		}
		want := ""
		if v0 {
			want = llm.TypeEmbedding
		}
		if len(models) != 2 || models[0].Type != "" || models[1].Type != want {
			t.Errorf("v0 listing %v: %+v", v0, models)
		}
	}
}

// FuzzEmbeddingsAnswer: any 200 body to an embeddings call is either an embeddings list the
// gateway relays (valid JSON, base64-encoded when asked) or an error; it never panics.
func FuzzEmbeddingsAnswer(f *testing.F) {
	for _, s := range []string{
		`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[1,-2]}],"model":"m","usage":{"prompt_tokens":1,"total_tokens":1}}`,
		`{"object":"list","data":[{"index":1,"embedding":[1]}]}`, `{"data":[{"index":0,"embedding":"AACAPw=="}]}`,
		`{"model":"m","embeddings":[[1,2],[3]],"prompt_eval_count":3}`, `{"error":"no"}`, `[]`, `{}`,
	} {
		f.Add([]byte(s), true)
	}
	c := newTestClient(f, KindOllama, "http://127.0.0.1:1/v1")
	f.Fuzz(func(t *testing.T, b []byte, encode bool) {
		if ch, err := c.embeddingsChunk(b, encode); err == nil {
			if !json.Valid(ch.Raw) || !ch.Complete || ch.Format != llm.FormatEmbeddings {
				t.Fatalf("%q: relayed %q", b, ch.Raw)
			}
		} else if llm.KindOf(err) != llm.KindUpstream {
			t.Fatalf("%q: %v", b, err)
		}
		if raw, _, err := c.ollamaList(b, 2, encode); err == nil && !json.Valid(raw) {
			t.Fatalf("%q: ollama list %q", b, raw)
		}
	})
}
