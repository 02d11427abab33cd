package openai

import (
	"bytes"
	"encoding/json"
)

// renameReasoning rewrites Ollama's choices[].<field>.reasoning into the reasoning_content
// every other backend (and SPEC §3) uses. field is "delta" for stream chunks, "message" for a
// whole completion. It decodes and re-encodes, so it runs only for Ollama and only when the
// key is present; on anything unexpected the chunk is relayed unchanged.
func renameReasoning(raw []byte, field string) []byte {
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) != nil {
		return raw
	}
	var choices []map[string]json.RawMessage
	if json.Unmarshal(top["choices"], &choices) != nil {
		return raw
	}
	changed := false
	for _, choice := range choices {
		var m map[string]json.RawMessage
		if json.Unmarshal(choice[field], &m) != nil {
			continue
		}
		r, ok := m["reasoning"]
		if !ok {
			continue
		}
		delete(m, "reasoning")
		if _, has := m["reasoning_content"]; !has {
			m["reasoning_content"] = r
		}
		choice[field] = marshal(m)
		changed = true
	}
	if !changed {
		return raw
	}
	top["choices"] = marshal(choices)
	return marshal(top)
}

// marshal encodes v without HTML escaping, so text the model wrote ("<b>") stays as it was.
func marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // maps of raw JSON always encode
	return bytes.TrimRight(b.Bytes(), "\n")
}
