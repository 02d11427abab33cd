package openai

import (
	"encoding/json"

	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/wirejson"
)

// completionToChunks turns a whole chat.completion (from a backend that ignored "stream":
// true) into what a stream would have carried: one chat.completion.chunk whose choices have
// the messages as deltas, then a usage-only chunk when the completion had usage. This decodes
// and re-encodes, which is fine on a path that only misbehaving backends take. On anything
// unexpected the completion is relayed as it is.
func completionToChunks(ch *llm.Chunk) []llm.Chunk {
	var top map[string]json.RawMessage
	var choices []map[string]json.RawMessage
	if wirejson.Unmarshal(ch.Raw, &top) != nil || wirejson.Unmarshal(top["choices"], &choices) != nil {
		return []llm.Chunk{*ch}
	}
	for _, choice := range choices {
		if msg, ok := choice["message"]; ok {
			choice["delta"] = msg
			delete(choice, "message")
		}
	}
	usage, hasUsage := top["usage"]
	delete(top, "usage")
	top["object"] = json.RawMessage(`"chat.completion.chunk"`)
	top["choices"] = marshal(choices)
	out := []llm.Chunk{{Raw: marshal(top), FinishReason: ch.FinishReason}}
	if hasUsage && present(usage) {
		u := map[string]json.RawMessage{"choices": json.RawMessage("[]"), "usage": usage}
		for _, k := range []string{"id", "created", "model", "object", "system_fingerprint"} {
			if v, ok := top[k]; ok {
				u[k] = v
			}
		}
		out = append(out, llm.Chunk{Raw: marshal(u), Usage: ch.Usage, UsageOnly: true})
	}
	return out
}
