package openai

import (
	"encoding/json"
	"fmt"

	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/upstream"
	"github.com/tollgate/tollgate/providers/wirejson"
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
		size := 0
		if req.Native != nil {
			size = len(req.Native.Body) // a translation is about as long as the client's body
		}
		b, err := wirejson.Encode(&r, size)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		return b, nil
	}
	model, err := json.Marshal(req.Model)
	if err != nil {
		return nil, fmt.Errorf("encode model: %w", err)
	}
	edits := []upstream.Edit{{Key: "model", Value: func([]byte) []byte { return model }}}
	if wantUsage {
		edits = append(edits, upstream.Edit{Key: "stream_options", Value: includeUsage})
	}
	body, err := upstream.SetMembers(req.Body, edits...)
	if err != nil {
		return nil, fmt.Errorf("request body: %w", err)
	}
	return body, nil
}

// includeUsage returns the stream_options value old with include_usage set to true; old is
// nil when the member is absent.
func includeUsage(old []byte) []byte {
	if len(old) == 0 || old[0] != '{' {
		return []byte(`{"include_usage":true}`)
	}
	out, err := upstream.SetMember(old, "include_usage", func([]byte) []byte { return []byte("true") })
	if err != nil {
		return []byte(`{"include_usage":true}`)
	}
	return out
}
