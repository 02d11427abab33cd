package llm

import "unicode/utf8"

// ImageTokens is what EstimatePromptTokens counts for one image part: about what OpenAI bills
// a high-detail 512×512 tile plus its base cost. Real costs vary by backend and size; an
// estimate only has to be of the right order, and usage corrects it afterwards.
const ImageTokens = 765

// EstimatePromptTokens estimates a request's prompt tokens (an embeddings call's inputs, a
// legacy completion's prompt and suffix) before any backend has counted
// them: about four bytes of text per token (characters, for text that is not ASCII: a CJK
// character is a token or more), four tokens of framing per message, ImageTokens per image,
// and the tool definitions as text. It is what routes compare their thresholds with and what
// rate limiters charge before the backend reports usage (SPEC §10, §12).
func EstimatePromptTokens(r *Request) int {
	n := 0
	text := func(s string) {
		b, c := len(s), utf8.RuneCountInString(s)
		if c < b { // multi-byte text: count characters, not bytes
			n += c
			return
		}
		n += (b + 3) / 4
	}
	for i := range r.Messages {
		m := &r.Messages[i]
		n += 4
		text(m.Role)
		text(m.Name)
		text(m.ReasoningContent)
		if m.Content.Parts == nil {
			text(m.Content.Text)
		}
		for _, p := range m.Content.Parts {
			switch {
			case p.ImageURL != nil || p.Type == "image_url":
				n += ImageTokens
			default:
				text(p.Text)
			}
		}
		for _, tc := range m.ToolCalls {
			text(tc.Function.Name)
			text(tc.Function.Arguments)
		}
	}
	for _, t := range r.Tools {
		text(t.Function.Name)
		text(t.Function.Description)
		text(string(t.Function.Parameters))
	}
	if r.Embed != nil {
		n += r.Embed.EstimateTokens()
	}
	if c := r.Completion; c != nil {
		for _, p := range c.Prompts {
			text(p)
		}
		text(c.Suffix)
		n += c.PromptTokens
	}
	return n
}

// HasImages reports whether any message carries an image part.
func (r *Request) HasImages() bool {
	for i := range r.Messages {
		for _, p := range r.Messages[i].Content.Parts {
			if p.ImageURL != nil || p.Type == "image_url" {
				return true
			}
		}
	}
	return false
}

// LastUserText returns the text of the last message with role "user", or "".
func (r *Request) LastUserText() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].Content.PlainText()
		}
	}
	return ""
}
