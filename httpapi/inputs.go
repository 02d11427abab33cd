package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
)

// maxInputs is how many inputs one embeddings call or one batch of prompts takes, OpenAI's
// own bound.
const maxInputs = 2048

// inputs is an embeddings input or a completions prompt as OpenAI takes it: a string, an
// array of strings, an array of token ids, or an array of arrays of token ids. One of
// texts and tokens is set, with at least one element.
type inputs struct {
	texts  []string
	tokens [][]int
}

// parseInputs decodes raw, the value of field, into inputs; an error names the field (and
// the element) that is wrong. Empty strings and empty token arrays are refused, as OpenAI
// refuses them.
func parseInputs(field string, raw json.RawMessage) (inputs, *apiError) {
	raw = bytes.Trim(raw, " \t\r\n")
	if len(raw) == 0 || string(raw) == "null" {
		return inputs{}, invalidf(field, "missing required field: %s (a string, an array of strings or of token arrays)", field)
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return inputs{}, invalidf(field, "%s is not a valid JSON string", field)
		}
		if s == "" {
			return inputs{}, invalidf(field, "%s must not be an empty string", field)
		}
		return inputs{texts: []string{s}}, nil
	case '[':
		return parseInputList(field, raw)
	}
	return inputs{}, invalidf(field, "%s must be a string, an array of strings or an array of token arrays, got %s", field, jsonKind(raw))
}

// parseInputList decodes an array-valued input: its first element decides which of the
// three array forms it is, and every element must be of that form.
func parseInputList(field string, raw json.RawMessage) (inputs, *apiError) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return inputs{}, invalidf(field, "%s is not a valid JSON array", field)
	}
	switch {
	case len(items) == 0:
		return inputs{}, invalidf(field, "%s must not be an empty array", field)
	case len(items) > maxInputs:
		return inputs{}, invalidf(field, "%s holds %d inputs, at most %d are allowed", field, len(items), maxInputs)
	}
	var in inputs
	first := bytes.TrimLeft(items[0], " \t\r\n")
	switch {
	case len(first) > 0 && (first[0] == '-' || first[0] >= '0' && first[0] <= '9'):
		ids, a := tokenArray(field, raw)
		if a != nil {
			return inputs{}, a
		}
		in.tokens = [][]int{ids}
		return in, nil
	case len(first) > 0 && first[0] == '[':
		for i, it := range items {
			ids, a := tokenArray(fmt.Sprintf("%s[%d]", field, i), it)
			if a != nil {
				return inputs{}, a
			}
			in.tokens = append(in.tokens, ids)
		}
		return in, nil
	}
	for i, it := range items {
		var s string
		el := fmt.Sprintf("%s[%d]", field, i)
		if t := bytes.TrimLeft(it, " \t\r\n"); len(t) == 0 || t[0] != '"' || json.Unmarshal(t, &s) != nil {
			return inputs{}, invalidf(el, "%s must be a string like the elements before it, got %s", el, jsonKind(it))
		}
		if s == "" {
			return inputs{}, invalidf(el, "%s must not be an empty string", el)
		}
		in.texts = append(in.texts, s)
	}
	return in, nil
}

// tokenArray decodes one array of token ids (non-negative integers) named field.
func tokenArray(field string, raw json.RawMessage) ([]int, *apiError) {
	var nums []json.Number
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&nums); err != nil {
		return nil, invalidf(field, "%s must be an array of token ids (integers)", field)
	}
	if len(nums) == 0 {
		return nil, invalidf(field, "%s must not be an empty token array", field)
	}
	ids := make([]int, len(nums))
	for i, n := range nums {
		v, err := n.Int64()
		if err != nil || v < 0 || v > math.MaxInt32 {
			return nil, invalidf(fmt.Sprintf("%s[%d]", field, i), "%s[%d] must be a token id (an integer from 0), got %s", field, i, n)
		}
		ids[i] = int(v)
	}
	return ids, nil
}

// jsonKind names the JSON type of raw for an error message.
func jsonKind(raw []byte) string {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a bool"
	case 'n':
		return "null"
	}
	return "a number"
}
