package httpapi

import (
	"cmp"
	"encoding/json"
	"sort"
	"strings"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// completion assembles streamed chunks into one chat.completion, choice by choice.
type completion struct {
	choices map[int]*choiceAcc
	usage   *llm.Usage
}

type choiceAcc struct {
	content, reasoning strings.Builder
	tools              []*wireToolCall
	finish             llm.FinishReason
}

// add takes one chunk; Raw chunks (an OpenAI-compatible backend's) are decoded first.
func (c *completion) add(ch *llm.Chunk) error {
	if ch.Raw != nil {
		return c.addRaw(ch.Raw)
	}
	if ch.Usage != nil {
		c.usage = ch.Usage
	}
	a := c.choice(ch.Index)
	a.content.WriteString(ch.Content)
	a.reasoning.WriteString(ch.ReasoningContent)
	for _, t := range ch.ToolCalls {
		tc := a.tool(t.Index)
		if t.ID != "" {
			tc.ID = t.ID
		}
		if t.Type != "" {
			tc.Type = t.Type
		}
		tc.Function.Name += t.Name
		tc.Function.Arguments += t.Arguments
	}
	if ch.FinishReason != "" {
		a.finish = ch.FinishReason
	}
	return nil
}

func (c *completion) addRaw(raw []byte) error {
	return structured(&llm.Chunk{Raw: raw}, c.add)
}

// structured decodes an OpenAI-compatible backend's Raw chunk — a chat.completion.chunk, or a
// whole chat.completion when Complete is set — into structured chunks, one per choice, and
// passes each to f; the usage, if any, comes first in a chunk of its own.
func structured(ch *llm.Chunk, f func(*llm.Chunk) error) error {
	type wireDelta struct {
		Content          string         `json:"content"`
		ReasoningContent string         `json:"reasoning_content"`
		ToolCalls        []wireToolCall `json:"tool_calls"`
	}
	var w struct {
		Choices []struct {
			Index        int              `json:"index"`
			Delta        wireDelta        `json:"delta"`
			Message      wireDelta        `json:"message"`
			FinishReason llm.FinishReason `json:"finish_reason"`
		} `json:"choices"`
		Usage *llm.Usage `json:"usage"`
	}
	if err := json.Unmarshal(ch.Raw, &w); err != nil {
		return err
	}
	if u := cmp.Or(ch.Usage, w.Usage); u != nil { // the adapter's has the details
		if err := f(&llm.Chunk{Usage: u, UsageOnly: true}); err != nil {
			return err
		}
	}
	for _, c := range w.Choices {
		d := c.Delta
		if ch.Complete {
			d = c.Message
		}
		s := llm.Chunk{Index: c.Index, Content: d.Content, ReasoningContent: d.ReasoningContent,
			FinishReason: c.FinishReason}
		for i, t := range d.ToolCalls {
			if ch.Complete {
				t.Index = i // a whole message's calls carry no index
			}
			s.ToolCalls = append(s.ToolCalls, llm.ToolCallDelta{Index: t.Index, ID: t.ID, Type: t.Type,
				Name: t.Function.Name, Arguments: t.Function.Arguments})
		}
		if err := f(&s); err != nil {
			return err
		}
	}
	return nil
}

func (c *completion) choice(i int) *choiceAcc {
	if c.choices == nil {
		c.choices = map[int]*choiceAcc{}
	}
	a, ok := c.choices[i]
	if !ok {
		a = &choiceAcc{}
		c.choices[i] = a
	}
	return a
}

func (a *choiceAcc) tool(i int) *wireToolCall {
	for _, t := range a.tools {
		if t.Index == i {
			return t
		}
	}
	t := &wireToolCall{Index: i}
	a.tools = append(a.tools, t)
	return t
}

type wireMessage struct {
	Role             string         `json:"role"`
	Content          *string        `json:"content"`
	ReasoningContent string         `json:"reasoning_content,omitempty"`
	ToolCalls        []llm.ToolCall `json:"tool_calls,omitempty"`
}

type wireCompletion struct {
	ID      string               `json:"id"`
	Object  string               `json:"object"`
	Created int64                `json:"created"`
	Model   string               `json:"model"`
	Choices []wireCompleteChoice `json:"choices"`
	Usage   *wireUsage           `json:"usage,omitempty"`
}

type wireCompleteChoice struct {
	Index        int              `json:"index"`
	Message      wireMessage      `json:"message"`
	FinishReason llm.FinishReason `json:"finish_reason"`
}

func (c *completion) build(requestID, model string, now time.Time) wireCompletion {
	out := wireCompletion{ID: "chatcmpl-" + requestID, Object: "chat.completion", Created: now.Unix(), Model: model,
		Choices: []wireCompleteChoice{}}
	idx := make([]int, 0, len(c.choices))
	for i := range c.choices {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	if len(idx) == 0 {
		idx = append(idx, 0)
		c.choice(0)
	}
	for _, i := range idx {
		a := c.choices[i]
		m := wireMessage{Role: "assistant", ReasoningContent: a.reasoning.String()}
		if text := a.content.String(); text != "" || len(a.tools) == 0 {
			m.Content = &text
		}
		for _, t := range a.tools {
			m.ToolCalls = append(m.ToolCalls, llm.ToolCall{ID: t.ID, Type: orDefault(t.Type, "function"),
				Function: llm.FunctionCall{Name: t.Function.Name, Arguments: t.Function.Arguments}})
		}
		fr := a.finish
		if fr == "" {
			fr = llm.FinishStop
		}
		out.Choices = append(out.Choices, wireCompleteChoice{Index: i, Message: m, FinishReason: fr})
	}
	if c.usage != nil {
		out.Usage = toWireUsage(c.usage)
	}
	return out
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
