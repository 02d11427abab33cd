// Package catalog knows the published limits and capabilities of well-known models, so a
// model card (SPEC §6) can say something useful about a model that neither the
// configuration nor the backend describes. It holds only values the model's maker
// documents; anything else is unknown and stays null on the card.
//
// # Matching
//
// Lookup matches a model name as backends and clients spell it:
//
//  1. The name is normalised: surrounding space is trimmed and it is lower-cased; a
//     "models/" prefix (Gemini) and any organisation path ("meta/", "nvidia/",
//     "deepseek-ai/", "lmstudio-community/": everything up to the last '/') are dropped; a
//     quantisation suffix after '@' (LM Studio) is dropped; an Ollama tag separator ':'
//     becomes '-' ("gpt-oss:20b" is "gpt-oss-20b").
//  2. An entry whose name (or one of its aliases) equals the normalised name wins.
//  3. Otherwise a snapshot of an entry matches: the entry's name followed by '-' and only
//     snapshot tokens: dates and numbers of two or more digits ("2024-08-06", "20250514",
//     "001", "0125"), "latest", "preview", "exp", or "v" and digits. The longest such name
//     wins. "gpt-4o-2024-08-06" is gpt-4o and "claude-sonnet-4-20250514" is claude-sonnet-4,
//     but "gpt-4o-mini-tts" and "claude-sonnet-4-6" are unknown: a single-digit token is a
//     new version, not a snapshot, and a word names a different model.
//
// Nothing else matches: no substring or family guesses, because a wrong context window is
// worse than none.
package catalog

import (
	"strings"

	"github.com/tollgate/tollgate/providers/llm"
)

// Entry is what the catalog knows about one model. Zero numbers and nil flags are unknown.
type Entry struct {
	Name            string // the table's canonical name of the model that matched
	ContextWindow   int    // tokens in (prompt + output), as its maker states it
	MaxOutputTokens int    // tokens one answer may have at most
	Reasoning       *bool  // produces reasoning (thinking) before answering
	Tools           *bool  // accepts tools (function calling)
	Vision          *bool  // accepts images
}

// Lookup returns the catalog's entry for a model name, following the matching rules of
// the package comment; ok is false when the model is not known.
func Lookup(name string) (Entry, bool) {
	n := normalise(name)
	if n == "" {
		return Entry{}, false
	}
	if r, ok := byName[n]; ok {
		return r.entry(), true
	}
	var best *row
	bestLen := 0
	for key, r := range byName {
		if len(key) > bestLen && len(n) > len(key)+1 && n[len(key)] == '-' &&
			strings.HasPrefix(n, key) && snapshot(n[len(key)+1:]) {
			best, bestLen = r, len(key)
		}
	}
	if best == nil {
		return Entry{}, false
	}
	return best.entry(), true
}

// Fill sets the fields of s that are still unknown (nil) from the catalog's entry for
// model, and reports whether the catalog knew the model. Known values in s are kept: the
// configuration and the backend know better than a table.
func Fill(s *llm.Spec, model string) bool {
	e, ok := Lookup(model)
	if !ok {
		return false
	}
	if s.ContextWindow == nil && e.ContextWindow > 0 {
		s.ContextWindow = intPtr(e.ContextWindow)
	}
	if s.MaxOutputTokens == nil && e.MaxOutputTokens > 0 {
		s.MaxOutputTokens = intPtr(e.MaxOutputTokens)
	}
	if s.Reasoning == nil {
		s.Reasoning = e.Reasoning
	}
	if s.Tools == nil {
		s.Tools = e.Tools
	}
	if s.Vision == nil {
		s.Vision = e.Vision
	}
	return true
}

func intPtr(v int) *int { return &v }

func normalise(name string) string {
	n := strings.ToLower(strings.TrimSpace(name))
	n = strings.TrimPrefix(n, "models/")
	if i := strings.LastIndexByte(n, '/'); i >= 0 {
		n = n[i+1:]
	}
	if i := strings.IndexByte(n, '@'); i >= 0 {
		n = n[:i]
	}
	return strings.ReplaceAll(n, ":", "-")
}

// snapshot reports whether s ("2024-08-06", "preview-05-20", "latest") is made only of
// snapshot tokens.
func snapshot(s string) bool {
	for tok := range strings.SplitSeq(s, "-") {
		switch {
		case tok == "latest" || tok == "preview" || tok == "exp":
		case len(tok) >= 2 && digits(tok):
		case len(tok) >= 2 && tok[0] == 'v' && digits(tok[1:]):
		default:
			return false
		}
	}
	return true
}

func digits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
