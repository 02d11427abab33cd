package cli

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/cli")

// testdataDir is the repository's testdata/cli.
var testdataDir = filepath.Join("..", "..", "testdata", "cli")

// decoded is what a decoder made of a recorded stream.
type decoded struct {
	content, reasoning string
	finish             llm.FinishReason
	usage              *llm.Usage
	err                *llm.Error
	finished           bool
	transcript         string // one line per chunk or outcome, for the golden file
}

func decodeFile(t *testing.T, kind, file string) decoded {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testdataDir, file))
	if err != nil {
		t.Fatal(err)
	}
	dec := dialects[kind].newDecoder()
	var d decoded
	var tr bytes.Buffer
	for n, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		chunks, f := dec.line(line)
		for _, c := range chunks {
			d.content += c.Content
			d.reasoning += c.ReasoningContent
			if c.FinishReason != "" {
				d.finish = c.FinishReason
			}
			if c.Usage != nil {
				d.usage = c.Usage
			}
			fmt.Fprintf(&tr, "chunk %s\n", chunkJSON(c))
		}
		if f != nil {
			d.err = f.toError("p", redactor{})
			// The line number shows how soon a run that cannot succeed is given up.
			fmt.Fprintf(&tr, "error at line %d %s retry_after=%v: %s\n", n+1, d.err.Kind, d.err.RetryAfter, d.err.Message)
			break
		}
	}
	d.finished = dec.finished()
	if d.err == nil {
		if d.finished {
			tr.WriteString("end finished\n")
		} else {
			fmt.Fprintf(&tr, "end without %s\n", dec.finalEvent())
		}
	}
	d.transcript = tr.String()
	return d
}

func chunkJSON(c llm.Chunk) string {
	type usage struct{ Prompt, Completion, Total, Cached, Reasoning int }
	v := struct {
		Content   string           `json:"content,omitempty"`
		Reasoning string           `json:"reasoning,omitempty"`
		Finish    llm.FinishReason `json:"finish,omitempty"`
		UsageOnly bool             `json:"usage_only,omitempty"`
		Usage     *usage           `json:"usage,omitempty"`
	}{Content: c.Content, Reasoning: c.ReasoningContent, Finish: c.FinishReason, UsageOnly: c.UsageOnly}
	if u := c.Usage; u != nil {
		v.Usage = &usage{u.PromptTokens, u.CompletionTokens, u.TotalTokens, u.CachedTokens, u.ReasoningTokens}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// checkGolden compares got with testdata/cli/name, or rewrites it under -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join(testdataDir, name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the golden file:\ngot:\n%s\nwant:\n%s", name, got, want)
	}
}

func TestDecodeRecordedStreams(t *testing.T) {
	const ok = llm.Kind(-1) // want no error
	tests := []struct {
		kind, file    string
		content       string
		reasoning     string
		finish        llm.FinishReason
		prompt, cache int
		wantKind      llm.Kind
		retryAfter    time.Duration
	}{
		{kind: KindCodex, file: "codex/success.jsonl", content: "Hello from the fake 世界 🙂",
			reasoning: "Thinking about it.", finish: llm.FinishStop, prompt: 10, cache: 2, wantKind: ok},
		{kind: KindCodex, file: "codex/auth_failed.jsonl", wantKind: llm.KindUpstreamAuth},
		{kind: KindCodex, file: "codex/rate_limited.jsonl", wantKind: llm.KindUpstreamRateLimited},
		{kind: KindCodex, file: "codex/no_final.jsonl", content: "Hello from the fake 世界 🙂",
			reasoning: "Thinking about it.", wantKind: ok},
		{kind: KindClaude, file: "claude/partial_thinking.jsonl", content: "Hello from the fake 世界 🙂",
			reasoning: "Thinking about it.", finish: llm.FinishStop, prompt: 12, cache: 2, wantKind: ok},
		{kind: KindClaude, file: "claude/whole_messages.jsonl", content: "Hello 世界",
			reasoning: "Considering.", finish: llm.FinishLength, prompt: 15, wantKind: ok},
		{kind: KindClaude, file: "claude/auth_retrying.jsonl", wantKind: llm.KindUpstreamAuth},
		{kind: KindClaude, file: "claude/rate_limit_retrying.jsonl", wantKind: llm.KindUpstreamRateLimited,
			retryAfter: 8697 * time.Millisecond},
		{kind: KindClaude, file: "claude/auth_error_result.jsonl", wantKind: llm.KindUpstreamAuth},
		{kind: KindGemini, file: "gemini/success.jsonl", content: "Hello 世界 🙂", finish: llm.FinishStop,
			prompt: 12, cache: 4, wantKind: ok},
		{kind: KindGemini, file: "gemini/quota_error.jsonl", wantKind: llm.KindUpstreamQuota},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			d := decodeFile(t, tc.kind, tc.file)
			checkGolden(t, strings.TrimSuffix(tc.file, ".jsonl")+".golden", d.transcript)
			if d.content != tc.content || d.reasoning != tc.reasoning {
				t.Errorf("content %q reasoning %q, want %q and %q", d.content, d.reasoning, tc.content, tc.reasoning)
			}
			if tc.wantKind == ok {
				if d.err != nil {
					t.Fatalf("error %v, want none", d.err)
				}
				if d.finish != tc.finish {
					t.Errorf("finish %q, want %q", d.finish, tc.finish)
				}
				if tc.finish != "" && (d.usage == nil || d.usage.PromptTokens != tc.prompt || d.usage.CachedTokens != tc.cache) {
					t.Errorf("usage %+v, want prompt %d cached %d", d.usage, tc.prompt, tc.cache)
				}
				return
			}
			if d.err == nil {
				t.Fatalf("no error, want %v", tc.wantKind)
			}
			if d.err.Kind != tc.wantKind || d.err.RetryAfter != tc.retryAfter {
				t.Errorf("error %v (retry after %v), want kind %v retry after %v", d.err, d.err.RetryAfter, tc.wantKind, tc.retryAfter)
			}
		})
	}
}

func TestCodexItemGrowth(t *testing.T) {
	dec := &codexDecoder{}
	var got []string
	for _, l := range []string{
		`{"type":"item.updated","item":{"id":"a","type":"agent_message","text":"Hel"}}`,
		`{"type":"item.updated","item":{"id":"a","type":"agent_message","text":"Hello"}}`,
		`{"type":"item.completed","item":{"id":"a","type":"agent_message","text":"Hello"}}`,
		`{"type":"item.completed","item":{"id":"c","type":"command_execution","text":"ls"}}`,
		`{"type":"item.completed","item":{"id":"b","type":"agent_message","text":"Bye"}}`,
		`not json at all`,
	} {
		chunks, f := dec.line([]byte(l))
		if f != nil {
			t.Fatalf("%s: %v", l, f.message)
		}
		for _, c := range chunks {
			got = append(got, c.Content)
		}
	}
	want := []string{"Hel", "lo", "\n\nBye"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestUndecodableLineFails(t *testing.T) {
	for kind, d := range dialects {
		_, f := d.newDecoder().line([]byte(`{"type":`))
		if f == nil || f.toError("p", redactor{}).Kind != llm.KindUpstream {
			t.Errorf("%s: broken JSON gave %+v, want an upstream failure", kind, f)
		}
	}
}

// fuzzDecoder feeds arbitrary lines to a decoder: it must never panic, never emit a chunk
// after its final event, and the final event must come with a finish reason.
func fuzzDecoder(f *testing.F, kind string, seeds ...string) {
	for _, s := range seeds {
		data, err := os.ReadFile(filepath.Join(testdataDir, s))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := dialects[kind].newDecoder()
		for _, line := range bytes.Split(data, []byte("\n")) {
			wasDone := dec.finished()
			chunks, fail := dec.line(line)
			if wasDone && len(chunks) > 0 {
				t.Fatalf("chunks after the final event: %+v", chunks)
			}
			if !wasDone && dec.finished() && (len(chunks) == 0 || chunks[0].FinishReason == "") {
				t.Fatalf("final event without a finish chunk: %+v", chunks)
			}
			if fail != nil {
				if e := fail.toError("p", redactor{}); e.Message == "" {
					t.Fatal("failure without a message")
				}
				return
			}
		}
	})
}

func FuzzCodexDecoder(f *testing.F) {
	fuzzDecoder(f, KindCodex, "codex/success.jsonl", "codex/auth_failed.jsonl")
}

func FuzzClaudeDecoder(f *testing.F) {
	fuzzDecoder(f, KindClaude, "claude/partial_thinking.jsonl", "claude/whole_messages.jsonl", "claude/auth_error_result.jsonl")
}

func FuzzGeminiDecoder(f *testing.F) {
	fuzzDecoder(f, KindGemini, "gemini/success.jsonl", "gemini/quota_error.jsonl")
}
