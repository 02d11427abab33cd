package gemini

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate/tollgate/providers/llm"
)

var updateEmbed = flag.Bool("update-embed", false, "rewrite testdata/embed goldens")

// TestEmbedGolden: an embeddings call in, the Gemini requests it becomes (path and body, as
// ai.google.dev documents embedContent and batchEmbedContents) and the OpenAI list the
// gateway answers with, in testdata/embed/<case>.golden.json.
func TestEmbedGolden(t *testing.T) {
	texts := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("text %d", i)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		e    llm.Embed
	}{
		{"one", llm.Embed{Texts: []string{"What is the meaning of life?"}, Dimensions: 3}},
		{"batch_base64", llm.Embed{Texts: []string{"a", "b"}, Base64: true}},
		{"batch_split", llm.Embed{Texts: texts(maxBatchEmbed + 1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			type sent struct {
				Path string          `json:"path"`
				Body json.RawMessage `json:"body"`
			}
			var mu sync.Mutex
			var seen []sent
			c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				seen = append(seen, sent{r.URL.Path, b})
				mu.Unlock()
				var req struct {
					Requests []json.RawMessage `json:"requests"`
				}
				_ = json.Unmarshal(b, &req)
				if strings.HasSuffix(r.URL.Path, ":embedContent") {
					fmt.Fprint(w, `{"embedding":{"values":[0.013168523,-0.008711934,-0.046782676]}}`)
					return
				}
				vals := make([]string, len(req.Requests))
				for i := range vals {
					vals[i] = fmt.Sprintf(`{"values":[%d,0.5]}`, i)
				}
				fmt.Fprintf(w, `{"embeddings":[%s]}`, strings.Join(vals, ","))
			}, nil)
			e := tc.e
			st, err := c.Open(context.Background(), &llm.Request{Model: "gemini-embedding-001", Embed: &e,
				Native: &llm.Native{Format: llm.FormatEmbeddings, Body: []byte(`{}`)}})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			ch, err := st.Next()
			if err != nil || !ch.Complete || ch.Format != llm.FormatEmbeddings {
				t.Fatalf("chunk %+v, %v", ch, err)
			}
			if _, err := st.Next(); err != io.EOF {
				t.Fatalf("after the list: %v", err)
			}
			if len(seen) > 2 { // the split case: keep the golden short
				seen = seen[:2]
			}
			got, err := json.MarshalIndent(map[string]any{"sent": seen, "answer": json.RawMessage(ch.Raw)}, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "embed", tc.name+".golden.json")
			if *updateEmbed {
				if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(want) != string(got)+"\n" {
				t.Fatalf("%s differs (-update-embed rewrites it):\n%s", path, got)
			}
		})
	}
}

// TestEmbedErrors: Gemini's errors for an embeddings call are normalized as for chat, and
// token arrays, which Gemini does not take, are refused naming input.
func TestEmbedErrors(t *testing.T) {
	c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"7s"}]}}`)
	}, nil)
	req := &llm.Request{Model: "gemini-embedding-001", Embed: &llm.Embed{Texts: []string{"a"}},
		Native: &llm.Native{Format: llm.FormatEmbeddings}}
	_, err := c.Open(context.Background(), req)
	var le *llm.Error
	if !asLLM(err, &le) || le.Kind != llm.KindUpstreamRateLimited || le.RetryAfter.Seconds() != 7 || le.Provider != "gemini" {
		t.Fatalf("429: %v", err)
	}
	req.Embed = &llm.Embed{Tokens: [][]int{{1, 2}}}
	_, err = c.Open(context.Background(), req)
	if !asLLM(err, &le) || le.Kind != llm.KindInvalidRequest || le.Param != "input" {
		t.Fatalf("token arrays: %v", err)
	}
	if !c.Serves(llm.FormatEmbeddings) || c.Serves(llm.FormatCompletions) {
		t.Fatal("Gemini serves embeddings and no legacy completions")
	}
}

func asLLM(err error, le **llm.Error) bool {
	e, ok := err.(*llm.Error)
	*le = e
	return ok
}

// FuzzDecodeEmbed: any answer body either decodes into exactly the vectors asked for or is
// an upstream error; it never panics.
func FuzzDecodeEmbed(f *testing.F) {
	for _, s := range []string{`{"embedding":{"values":[1,2]}}`, `{"embeddings":[{"values":[1]},{"values":[2]}]}`, `{}`, `[]`, `{"embeddings":null}`} {
		f.Add([]byte(s), 1)
	}
	f.Fuzz(func(t *testing.T, b []byte, want int) {
		if want < 0 || want > 1000 {
			return
		}
		vecs, err := decodeEmbed(b, want)
		if err != nil {
			if llm.KindOf(err) != llm.KindUpstream {
				t.Fatalf("%q: %v", b, err)
			}
			return
		}
		if len(vecs) != want {
			t.Fatalf("%q: %d vectors for %d", b, len(vecs), want)
		}
	})
}
