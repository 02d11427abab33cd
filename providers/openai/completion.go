package openai

import (
	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/wirejson"
)

// completionFacts is what the gateway reads of a whole chat.completion: its first choice's
// finish reason and its usage.
type completionFacts struct {
	finish llm.FinishReason
	usage  *llm.Usage
	// choices is how many choices the answer has: one in the usual shape, none in an error
	// body.
	choices int
}

// decodeCompletion reads the facts of b, a backend's whole answer, in one decode that skips
// the content (wirejson.Unmarshal: names as written, none twice). err is the decode's: b is not
// JSON (wirejson.Valid says which), or JSON of another shape than a chat.completion's (it is
// then relayed as it is, without them).
func decodeCompletion(b []byte) (facts completionFacts, err error) {
	var info struct {
		Choices []struct {
			FinishReason llm.FinishReason `json:"finish_reason"`
		} `json:"choices"`
		Usage *usageJSON `json:"usage"`
	}
	if err := wirejson.Unmarshal(b, &info); err != nil {
		return facts, err
	}
	facts.usage, facts.choices = info.Usage.toLLM(), len(info.Choices)
	if len(info.Choices) > 0 {
		facts.finish = info.Choices[0].FinishReason
	}
	return facts, nil
}
