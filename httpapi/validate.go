package httpapi

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/tollgate/tollgate/providers/llm"
)

// checkChatRanges applies the ranges OpenAI's Chat Completions API enforces, so a value the
// backend would refuse (or, from a lenient backend, act on: n 1000) is answered here, naming
// the field. (logprobs is a boolean in Chat Completions: its type is checked by decoding.)
func checkChatRanges(req *llm.Request) *apiError {
	return firstError(
		checkTokens("max_tokens", req.MaxTokens, 1),
		checkTokens("max_completion_tokens", req.MaxCompletionTokens, 1),
		checkIntRange("n", req.N, 1, 128),
		checkIntRange("top_logprobs", req.TopLogprobs, 0, 20),
		checkRange("temperature", req.Temperature, 0, 2),
		checkRange("top_p", req.TopP, 0, 1),
		checkRange("presence_penalty", req.PresencePenalty, -2, 2),
		checkRange("frequency_penalty", req.FrequencyPenalty, -2, 2),
	)
}

// checkIntRange refuses an integer outside [lo, hi], naming the field.
func checkIntRange(param string, v *int, lo, hi int) *apiError {
	if v != nil && (*v < lo || *v > hi) {
		return invalidf(param, "%s must be between %d and %d, got %d", param, lo, hi, *v)
	}
	return nil
}

// typeMismatch is the 400 for a value of the wrong JSON type: it names the field by its JSON
// path and the JSON type wanted, never a Go type.
func typeMismatch(te *json.UnmarshalTypeError) apiError {
	field := clientPath(te.Field)
	return invalid(field, fmt.Sprintf("field %s: expected %s, got %s", field, jsonType(te.Type), te.Value))
}

// clientPath is a field path as the client wrote it. encoding/json puts an embedded struct's
// Go type name in the path ("Request.messages" when chatDecoded embeds llm.Request); the
// names a client sends are the JSON tags, which all start lower case, so an element that
// starts upper case is dropped.
func clientPath(field string) string {
	parts := strings.Split(field, ".")
	kept := parts[:0]
	for _, p := range parts {
		if p != "" && (p[0] < 'A' || p[0] > 'Z') {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, ".")
}

// jsonType names, for a client, the JSON a Go type decodes from.
func jsonType(t reflect.Type) string {
	switch t {
	case reflect.TypeFor[llm.Content]():
		return "a string or an array of content parts"
	case reflect.TypeFor[llm.Stop]():
		return "a string or an array of strings"
	case reflect.TypeFor[json.RawMessage]():
		return "a JSON value"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return jsonType(t.Elem())
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "a value of another type"
}
