package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tollgate/tollgate/providers/llm"
)

// buildPrompt turns a chat transcript into the one text a CLI reads on stdin.
//
// The CLIs take a single prompt, not a message list, so the conversation is written out:
// system and developer messages first inside <system>, earlier turns inside <transcript>,
// then the last user message as the text to answer. A lone user message is passed as is, so
// the common case reads exactly like typing into the CLI. Images cannot travel this way and
// are replaced by a marker rather than dropped silently.
func buildPrompt(msgs []llm.Message) (string, error) {
	var system []string
	var turns []llm.Message
	for _, m := range msgs {
		switch m.Role {
		case "system", "developer":
			if t := strings.TrimSpace(contentText(m.Content)); t != "" {
				system = append(system, t)
			}
		case "user", "assistant", "tool", "function":
			turns = append(turns, m)
		default:
			return "", fmt.Errorf("message role %q is not supported", m.Role)
		}
	}
	if len(turns) == 0 {
		return "", errors.New("messages: need at least one user message")
	}
	last := turns[len(turns)-1]
	lead, lastText := "Reply to the user's message below, continuing the transcript above.\n\n", contentText(last.Content)
	if last.Role != "user" {
		// Nothing new from the user: the whole conversation is context and the ask is to go on.
		lead, lastText = "", "Continue the conversation in the transcript above from where it stops."
		turns = append(turns, llm.Message{Role: "user"})
	}
	if strings.TrimSpace(lastText) == "" {
		return "", errors.New("messages: the last user message is empty")
	}
	if len(system) == 0 && len(turns) == 1 {
		return lastText, nil
	}

	var b strings.Builder
	if len(system) > 0 {
		b.WriteString("<system>\n")
		b.WriteString(strings.Join(system, "\n\n"))
		b.WriteString("\n</system>\n\n")
	}
	if len(turns) > 1 {
		b.WriteString("<transcript>\n")
		for _, m := range turns[:len(turns)-1] {
			writeTurn(&b, m)
		}
		b.WriteString("</transcript>\n\n")
		b.WriteString(lead)
	}
	b.WriteString(lastText)
	return b.String(), nil
}

func writeTurn(b *strings.Builder, m llm.Message) {
	role := m.Role
	if role == "function" {
		role = "tool"
	}
	attrs := ""
	if role == "tool" && m.ToolCallID != "" {
		attrs = fmt.Sprintf(" tool_call_id=%q", m.ToolCallID)
	}
	fmt.Fprintf(b, "<%s%s>\n", role, attrs)
	if t := contentText(m.Content); t != "" {
		b.WriteString(t)
		b.WriteString("\n")
	}
	for _, tc := range m.ToolCalls {
		fmt.Fprintf(b, "<tool_call id=%q name=%q>%s</tool_call>\n", tc.ID, tc.Function.Name, tc.Function.Arguments)
	}
	fmt.Fprintf(b, "</%s>\n", role)
}

// contentText returns a message's text with non-text parts marked.
func contentText(c llm.Content) string {
	if c.Parts == nil {
		return c.Text
	}
	var b strings.Builder
	for _, p := range c.Parts {
		switch p.Type {
		case "text":
			b.WriteString(p.Text)
		case "image_url":
			b.WriteString("[image omitted: this backend takes text only]")
		default:
			fmt.Fprintf(&b, "[%s part omitted]", p.Type)
		}
	}
	return b.String()
}
