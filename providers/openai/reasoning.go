package openai

import (
	"bytes"
	"encoding/json"
	"github.com/tollgate/tollgate/providers/wirejson"
)

var (
	reasoningKey        = []byte(`"reasoning"`)
	reasoningContentKey = []byte(`"reasoning_content"`)
)

// hasBareReasoning reports whether a frame or body may carry "reasoning" without
// "reasoning_content": Ollama, vLLM, LM Studio and OpenRouter-style servers name the
// model's thinking "reasoning", whatever kind they are configured as. Two byte searches, the
// first of which fails on almost every chunk, so the hot path stays as it was. (Quotes in
// the model's own text are escaped, so they never match the key.)
func hasBareReasoning(b []byte) bool {
	return bytes.Contains(b, reasoningKey) && !bytes.Contains(b, reasoningContentKey)
}

// renameReasoning rewrites choices[].<field>.reasoning into the reasoning_content DeepSeek,
// Qwen and the others (and SPEC §3) use. field is "delta" for stream chunks, "message" for a
// whole completion. It decodes and re-encodes, so it runs only when hasBareReasoning says
// the key is there; on anything unexpected the chunk is relayed unchanged.
func renameReasoning(raw []byte, field string) []byte {
	var top map[string]json.RawMessage
	if wirejson.Unmarshal(raw, &top) != nil {
		return raw
	}
	var choices []map[string]json.RawMessage
	if wirejson.Unmarshal(top["choices"], &choices) != nil {
		return raw
	}
	changed := false
	for _, choice := range choices {
		var m map[string]json.RawMessage
		if wirejson.Unmarshal(choice[field], &m) != nil {
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
