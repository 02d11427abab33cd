package openai

import (
	"encoding/json"

	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/upstream"
)

// completionFacts is what the gateway reads of a whole chat.completion: its first choice's
// finish reason and its usage.
type completionFacts struct {
	finish llm.FinishReason
	usage  *llm.Usage
}

// scanCompletion reads the facts of the JSON object b as json.Unmarshal into
// {choices: [{finish_reason}], usage} would, in one upstream.Scan pass and a decode of the
// usage object alone. encoding/json's decode of the whole answer, content and all, was the
// largest part of what a non-streaming call cost beyond a bare proxy (docs/benchmarks.md).
//
// It takes the usual shape only: one choice, the keys as written, no duplicates. For any other
// it reports fast false and the caller decodes the whole answer (decodeCompletion); valid false
// means b is not JSON at all.
func scanCompletion(b []byte) (facts completionFacts, fast, valid bool) {
	var usage, choices, finish upstream.Member
	var nUsage, nChoices, nFinish int
	odd := false
	valid = upstream.Scan(b, func(m upstream.Member) {
		key := b[m.Key:m.KeyEnd]
		switch {
		case m.Depth != 1 && m.Depth != 3:
		case m.Escaped: // it could spell anything
			odd = true
		case m.Depth == 1 && string(key) == "usage":
			usage, nUsage = m, nUsage+1
		case m.Depth == 1 && string(key) == "choices":
			choices, nChoices = m, nChoices+1
		case m.Depth == 1:
			// encoding/json matches names without regard to case.
			odd = odd || foldsTo(key, "usage", "choices")
		case string(key) == "finish_reason": // depth 3: a member of an object in an array
			finish, nFinish = m, nFinish+1
		default:
			odd = odd || foldsTo(key, "finish_reason")
		}
	})
	if !valid || odd || nUsage > 1 || nChoices != 1 || nFinish > 1 {
		return facts, false, valid
	}
	// Exactly one choice, an object: '[', its one item, ']'.
	cs := b[choices.At:choices.End]
	first := upstream.SkipSpace(cs, 1)
	if cs[0] != '[' || cs[first] != '{' || cs[upstream.SkipSpace(cs, upstream.ValueEnd(cs, first))] != ']' {
		return facts, false, true
	}
	// A finish_reason at depth 3 inside the choices belongs to that one choice.
	if nFinish == 1 && finish.At > choices.At && finish.End < choices.End {
		v := b[finish.At:finish.End]
		if string(v) != "null" {
			s, ok := llm.StringValue(v)
			if !ok {
				return facts, false, true // not a string: encoding/json's to say
			}
			facts.finish = llm.FinishReason(s)
		}
	}
	if nUsage == 1 {
		switch v := b[usage.At:usage.End]; {
		case string(v) == "null":
		case v[0] == '{':
			var u usageJSON
			if json.Unmarshal(v, &u) != nil {
				return facts, false, true
			}
			facts.usage = u.toLLM()
		default:
			return facts, false, true
		}
	}
	return facts, true, true
}

// decodeCompletion reads the facts of b by decoding it whole; ok false when b has another
// shape than a chat.completion's (it is then relayed as it is, without them).
func decodeCompletion(b []byte) (facts completionFacts, ok bool) {
	var info struct {
		Choices []struct {
			FinishReason llm.FinishReason `json:"finish_reason"`
		} `json:"choices"`
		Usage *usageJSON `json:"usage"`
	}
	if json.Unmarshal(b, &info) != nil {
		return facts, false
	}
	facts.usage = info.Usage.toLLM()
	if len(info.Choices) > 0 {
		facts.finish = info.Choices[0].FinishReason
	}
	return facts, true
}
