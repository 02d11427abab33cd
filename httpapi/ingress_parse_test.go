package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/providers/llm"
)

// TestIngressRequestGolden: each request under testdata/httpapi/{responses,messages}/request
// translates to the chat request in its .golden file, or to the 400 it names there. The
// .golden holds the chat body an OpenAI-compatible backend would receive, then the native
// form the request carries for a backend that speaks the client's format.
func TestIngressRequestGolden(t *testing.T) {
	for _, api := range []struct {
		dir   string
		parse func([]byte, *httptest.ResponseRecorder) (*llm.Request, *apiError)
	}{
		{"responses", func(b []byte, _ *httptest.ResponseRecorder) (*llm.Request, *apiError) {
			return parseResponses(b, httptest.NewRequest("POST", "/v1/responses", nil))
		}},
		{"messages", func(b []byte, _ *httptest.ResponseRecorder) (*llm.Request, *apiError) {
			r := httptest.NewRequest("POST", "/v1/messages", nil)
			r.Header.Set("anthropic-version", "2023-06-01")
			r.Header.Set("anthropic-beta", "interleaved-thinking-2025-05-14")
			return parseMessages(b, r)
		}},
	} {
		files, err := filepath.Glob(filepath.Join("..", "testdata", "httpapi", api.dir, "request", "*.json"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no requests (%v)", api.dir, err)
		}
		for _, f := range files {
			name := api.dir + "/" + strings.TrimSuffix(filepath.Base(f), ".json")
			t.Run(name, func(t *testing.T) {
				body, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				req, a := api.parse(body, nil)
				got := describeParse(t, req, a)
				wantErr := strings.HasPrefix(filepath.Base(f), "err-")
				if wantErr != (a != nil) {
					t.Errorf("error %v, want an error: %v", a, wantErr)
				}
				checkGolden(t, strings.TrimSuffix(f, ".json")+".golden", got)
			})
		}
	}
}

// describeParse is what a parse gave: the translated chat body and the native form, or the error.
func describeParse(t *testing.T, req *llm.Request, a *apiError) string {
	t.Helper()
	if a != nil {
		return fmt.Sprintf("%d %s param=%q\n%s\n", a.status, a.code, a.param, a.message)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(req); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "native: %s, %d bytes, headers %v\n", req.Native.Format, len(req.Native.Body), req.Native.Header)
	return b.String()
}

// checkGolden compares got with the golden file, rewriting it under -update.
func checkGolden(t *testing.T, golden, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if got != string(want) {
		t.Errorf("mismatch with %s:\n got:\n%s\nwant:\n%s", golden, got, want)
	}
}

// FuzzParseResponses: any body either translates into a chat request with a model and
// messages carrying the body as its native form, or yields a 400 naming what is wrong.
func FuzzParseResponses(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("..", "testdata", "httpapi", "responses", "request", "*.json"))
	for _, s := range seeds {
		if b, err := os.ReadFile(s); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"model":"m","input":[{"role":"assistant","content":"x"},{"type":"function_call","call_id":"c","name":"n","arguments":"{}"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, a := parseResponses(body, httptest.NewRequest("POST", "/v1/responses", nil))
		checkParsed(t, body, req, a, llm.FormatResponses)
	})
}

// FuzzParseMessages is FuzzParseResponses for /v1/messages.
func FuzzParseMessages(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("..", "testdata", "httpapi", "messages", "request", "*.json"))
	for _, s := range seeds {
		if b, err := os.ReadFile(s); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{"type":"url","url":"u"}}]}]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, a := parseMessages(body, httptest.NewRequest("POST", "/v1/messages", nil))
		checkParsed(t, body, req, a, llm.FormatMessages)
	})
}

func checkParsed(t *testing.T, body []byte, req *llm.Request, a *apiError, f llm.Format) {
	t.Helper()
	if a != nil {
		if a.status != 400 || a.code != "invalid_request" || a.message == "" {
			t.Fatalf("bad rejection %+v", a)
		}
		return
	}
	if req.Model == "" || len(req.Messages) == 0 || req.Native == nil || req.Native.Format != f || !json.Valid(req.Native.Body) {
		t.Fatalf("accepted an incomplete request: %q → %+v", body, req)
	}
	for _, m := range req.Messages {
		for _, tc := range m.ToolCalls {
			if tc.ID == "" || tc.Function.Name == "" {
				t.Fatalf("a tool call without id or name: %q", body)
			}
		}
	}
	if _, err := json.Marshal(req); err != nil {
		t.Fatalf("the translation does not encode: %v", err)
	}
}
