package cli

import (
	"bytes"
	"fmt"

	"github.com/tollgate/tollgate/providers/llm"
)

// looksJSON reports whether a stdout line is an event. CLIs occasionally print plain text
// (update notices, warnings) on stdout; those are skipped.
func looksJSON(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{'
}

// undecodable is the failure for an event line that is not valid JSON.
func undecodable(cli string, err error) *failure {
	return &failure{known: true, kind: llm.KindUpstream,
		message: fmt.Sprintf("%s printed an event that is not valid JSON: %v", cli, err)}
}

// finalChunks ends an answer the way OpenAI streams do: a chunk with the finish reason,
// then (when known) a usage-only chunk.
func finalChunks(reason llm.FinishReason, u *llm.Usage) []llm.Chunk {
	out := []llm.Chunk{{FinishReason: reason}}
	if u != nil {
		out = append(out, llm.Chunk{UsageOnly: true, Usage: u})
	}
	return out
}

// isWord reports whether s is a short lowercase word, safe to splice into a CLI's config
// override (reasoning effort values: "low", "high", ...).
func isWord(s string) bool {
	if s == "" || len(s) > 16 {
		return false
	}
	for _, r := range s {
		if r < 'a' || r > 'z' {
			return false
		}
	}
	return true
}
