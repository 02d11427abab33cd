package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/providers/llm"
)

func TestBuildPrompt(t *testing.T) {
	msgs := func(js string) []llm.Message {
		var m []llm.Message
		if err := json.Unmarshal([]byte(js), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	tests := []struct {
		name, golden string
		messages     string
	}{
		{"lone user message", "prompt/lone_user.golden", `[{"role":"user","content":"What is 2+2?"}]`},
		{"system and transcript", "prompt/transcript.golden", `[
			{"role":"system","content":"You are terse."},
			{"role":"developer","content":[{"type":"text","text":"Answer in French."}]},
			{"role":"user","content":"Hi"},
			{"role":"assistant","content":"Salut.","tool_calls":[{"id":"c1","type":"function","function":{"name":"lookup","arguments":"{\"q\":\"x\"}"}}]},
			{"role":"tool","tool_call_id":"c1","content":"result 42"},
			{"role":"user","content":[{"type":"text","text":"And this? "},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}]`},
		{"ends with assistant", "prompt/ends_with_assistant.golden", `[
			{"role":"user","content":"Write a haiku"},
			{"role":"assistant","content":"Autumn moonlight—"}]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := buildPrompt(msgs(tc.messages))
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, tc.golden, got)
		})
	}
}

func TestBuildPromptRejects(t *testing.T) {
	for _, m := range [][]llm.Message{
		nil,
		{{Role: "system", Content: llm.Content{Text: "only instructions"}}},
		{{Role: "robot", Content: llm.Content{Text: "beep"}}},
	} {
		if p, err := buildPrompt(m); err == nil {
			t.Errorf("buildPrompt(%+v) = %q, want an error", m, p)
		}
	}
}

func FuzzBuildPrompt(f *testing.F) {
	f.Add("system", "be brief", "user", "hi")
	f.Add("user", "a", "assistant", "b")
	f.Fuzz(func(t *testing.T, r1, c1, r2, c2 string) {
		m := []llm.Message{{Role: r1, Content: llm.Content{Text: c1}}, {Role: r2, Content: llm.Content{Text: c2}}}
		p, err := buildPrompt(m)
		if err != nil {
			return
		}
		// Whatever the user said last is in the prompt, verbatim.
		for i := len(m) - 1; i >= 0; i-- {
			if m[i].Role == "user" {
				if !strings.Contains(p, m[i].Content.Text) {
					t.Fatalf("prompt %q lacks the user's %q", p, m[i].Content.Text)
				}
				break
			}
		}
	})
}
