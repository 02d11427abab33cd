package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/upstream"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/anthropic")

// testdata is the repository's top-level testdata directory for this adapter.
const testdata = "../../testdata/anthropic"

// checkGolden compares got with the golden file, or rewrites it under -update.
func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run with -update to accept):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// inputs lists the test inputs in dir with the given suffix, failing when there are none so
// a moved directory cannot make the test pass vacuously.
func inputs(t *testing.T, dir, suffix string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testdata, dir, "*"+suffix))
	if err != nil || len(files) == 0 {
		t.Fatalf("no %s inputs in %s/%s: %v", suffix, testdata, dir, err)
	}
	return files
}

// chunkView is a chunk as a golden file shows it: only the fields that are set.
type chunkView struct {
	Index            int              `json:"index,omitempty"`
	Role             string           `json:"role,omitempty"`
	Content          string           `json:"content,omitempty"`
	ReasoningContent string           `json:"reasoning_content,omitempty"`
	ToolCalls        []toolCallView   `json:"tool_calls,omitempty"`
	FinishReason     llm.FinishReason `json:"finish_reason,omitempty"`
	UsageOnly        bool             `json:"usage_only,omitempty"`
	Usage            *usageView       `json:"usage,omitempty"`
}

type toolCallView struct {
	Index     int    `json:"index"`
	ID        string `json:"id,omitempty"`
	Type      string `json:"type,omitempty"`
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
}

type usageView struct {
	llm.Usage
	Cached    int `json:"cached_tokens,omitempty"`
	Reasoning int `json:"reasoning_tokens,omitempty"`
}

type errorView struct {
	Kind         string `json:"kind"`
	Message      string `json:"message"`
	Provider     string `json:"provider,omitempty"`
	UpstreamCode string `json:"upstream_code,omitempty"`
	RetryAfterMS int64  `json:"retry_after_ms,omitempty"`
}

// transcript renders every chunk of s as one JSON line, then the terminal error if it is
// not io.EOF.
func transcript(t *testing.T, s llm.Stream) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for i := 0; ; i++ {
		if i > 10000 {
			t.Fatal("stream does not end")
		}
		c, err := s.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			_ = enc.Encode(map[string]errorView{"error": viewError(err)})
			break
		}
		_ = enc.Encode(viewChunk(c))
	}
	return b.Bytes()
}

func viewChunk(c llm.Chunk) chunkView {
	v := chunkView{Index: c.Index, Role: c.Role, Content: c.Content, ReasoningContent: c.ReasoningContent,
		FinishReason: c.FinishReason, UsageOnly: c.UsageOnly}
	for _, tc := range c.ToolCalls {
		v.ToolCalls = append(v.ToolCalls, toolCallView(tc))
	}
	if c.Usage != nil {
		v.Usage = &usageView{Usage: *c.Usage, Cached: c.Usage.CachedTokens, Reasoning: c.Usage.ReasoningTokens}
	}
	return v
}

func viewError(err error) errorView {
	e, ok := errors.AsType[*llm.Error](err)
	if !ok {
		return errorView{Kind: "not an *llm.Error", Message: err.Error()}
	}
	return errorView{Kind: e.Kind.String(), Message: e.Message, Provider: e.Provider,
		UpstreamCode: e.UpstreamCode, RetryAfterMS: e.RetryAfter.Milliseconds()}
}

// testErrorf builds in-stream errors the way a Client named "claude" does.
func testErrorf(ae *apiError) *llm.Error {
	return streamError("claude", ae, "sk-test")
}

// TestRequestGolden translates each OpenAI request in testdata/anthropic/request/*.json and
// compares the Messages API body with the .golden file next to it.
func TestRequestGolden(t *testing.T) {
	for _, in := range inputs(t, "request", ".request.json") {
		name := strings.TrimSuffix(filepath.Base(in), ".request.json")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			var req llm.Request
			if err := json.Unmarshal(raw, &req); err != nil {
				t.Fatalf("decoding %s: %v", in, err)
			}
			body, err := buildRequest(&req)
			if err != nil {
				t.Fatalf("buildRequest: %v", err)
			}
			got, err := json.MarshalIndent(body, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, strings.TrimSuffix(in, ".request.json")+".golden.json", append(got, '\n'))
		})
	}
}

// TestStreamGolden decodes each SSE transcript in testdata/anthropic/stream/*.sse and compares
// the chunks (and terminal error) with the .golden.jsonl file next to it.
func TestStreamGolden(t *testing.T) {
	for _, in := range inputs(t, "stream", ".sse") {
		name := strings.TrimSuffix(filepath.Base(in), ".sse")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			s := upstream.NewEventStream(t.Context(), "claude", io.NopCloser(bytes.NewReader(raw)), nil, newDecoder(testErrorf), 0, "")
			defer s.Close()
			checkGolden(t, strings.TrimSuffix(in, ".sse")+".golden.jsonl", transcript(t, s))
		})
	}
}

// TestMessageGolden decodes each non-streaming answer in testdata/anthropic/message/*.json.
func TestMessageGolden(t *testing.T) {
	for _, in := range inputs(t, "message", ".response.json") {
		name := strings.TrimSuffix(filepath.Base(in), ".response.json")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			chunks, err := decodeMessage(raw)
			if err != nil {
				t.Fatalf("decodeMessage: %v", err)
			}
			s := upstream.Chunks(chunks, io.EOF)
			checkGolden(t, strings.TrimSuffix(in, ".response.json")+".golden.jsonl", transcript(t, s))
		})
	}
}
