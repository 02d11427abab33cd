package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/tollgate/tollgate/providers/llm"
)

// requestBody returns the exact JSON the backend receives for req.
//
// When the client's body is known it is forwarded with only "model" replaced, so parameters
// llm.Request does not model (seed, response_format, thinking, ...) still reach the backend
// and the client's key order is kept. A stream additionally gets stream_options.include_usage,
// so the gateway learns token counts even when the client did not ask for them.
func requestBody(req *llm.Request) ([]byte, error) {
	wantUsage := req.Stream && !req.WantsUsage()
	if req.Body == nil {
		r := *req
		if wantUsage {
			so := llm.StreamOptions{IncludeUsage: true}
			r.StreamOptions = &so
		}
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false) // HTML escaping is for HTML pages, not API bodies
		if err := enc.Encode(&r); err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		return bytes.TrimRight(b.Bytes(), "\n"), nil
	}
	model, err := json.Marshal(req.Model)
	if err != nil {
		return nil, fmt.Errorf("encode model: %w", err)
	}
	body, err := setMember(req.Body, "model", func([]byte) []byte { return model })
	if err != nil {
		return nil, fmt.Errorf("request body: %w", err)
	}
	if wantUsage {
		body, err = setMember(body, "stream_options", includeUsage)
		if err != nil {
			return nil, fmt.Errorf("request body: %w", err)
		}
	}
	return body, nil
}

// includeUsage returns the stream_options value old with include_usage set to true; old is
// nil when the member is absent.
func includeUsage(old []byte) []byte {
	if len(old) == 0 || old[0] != '{' {
		return []byte(`{"include_usage":true}`)
	}
	out, err := setMember(old, "include_usage", func([]byte) []byte { return []byte("true") })
	if err != nil {
		return []byte(`{"include_usage":true}`)
	}
	return out
}

// member is the byte span of one top-level member's value in a JSON object.
type member struct {
	key        string
	start, end int
}

// members lists the top-level members of the JSON object obj.
func members(obj []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	var out []member
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("read key: %w", err)
		}
		key, _ := t.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("read %q: %w", key, err)
		}
		end := int(dec.InputOffset())
		out = append(out, member{key: key, start: end - len(raw), end: end})
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return nil, errors.New("unterminated JSON object")
	}
	if rest := bytes.TrimLeft(obj[dec.InputOffset():], " \t\r\n"); len(rest) > 0 { // JSON's whitespace only
		return nil, errors.New("data after the JSON object")
	}
	return out, nil
}

// setMember returns a copy of obj with every value of key replaced by f(old value), or with
// key:f(nil) added when key is absent. Everything else is kept byte for byte.
func setMember(obj []byte, key string, f func(old []byte) []byte) ([]byte, error) {
	ms, err := members(obj)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(obj)+64)
	last := 0
	found := false
	for _, m := range ms {
		if m.key != key {
			continue
		}
		found = true
		out = append(out, obj[last:m.start]...)
		out = append(out, f(obj[m.start:m.end])...)
		last = m.end
	}
	if found {
		return append(out, obj[last:]...), nil
	}
	// Absent: append it as the last member, where a person would have written it.
	end := bytes.LastIndexByte(obj, '}')
	k, _ := json.Marshal(key)
	out = append(out, obj[:end]...)
	if len(ms) > 0 {
		out = append(out, ',')
	}
	out = append(out, k...)
	out = append(out, ':')
	out = append(out, f(nil)...)
	return append(out, obj[end:]...), nil
}
