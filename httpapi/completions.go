package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/tollgate/tollgate/providers/llm"
)

// completionsAPI is POST /v1/completions, OpenAI's legacy completions (SPEC §19), with
// suffix for fill-in-the-middle. The backends that serve it are OpenAI-compatible and answer
// text_completion objects, which the adapter reads as chat chunks: relayed as they came,
// streamed or whole, as chat's are (chatAnswer).
var completionsAPI = &ingress{
	route:  "/v1/completions",
	native: llm.FormatChat,
	parse:  func(body []byte, _ *http.Request) (*parsed, *apiError) { return only(parseCompletions(body)) },
	fail:   failOpenAI,
	answer: newChatAnswer,
}

// defaultCompletionTokens is the legacy API's max_tokens when the client sends none.
const defaultCompletionTokens = 16

// completionsBody is a legacy completions request's fields the gateway reads or checks;
// the backend receives the body as sent.
type completionsBody struct {
	Model            string             `json:"model"`
	Prompt           json.RawMessage    `json:"prompt"`
	Suffix           *string            `json:"suffix"`
	Stream           bool               `json:"stream"`
	StreamOptions    *llm.StreamOptions `json:"stream_options"`
	MaxTokens        *int               `json:"max_tokens"`
	Echo             bool               `json:"echo"`
	Logprobs         *int               `json:"logprobs"`
	N                *int               `json:"n"`
	BestOf           *int               `json:"best_of"`
	Temperature      *float64           `json:"temperature"`
	TopP             *float64           `json:"top_p"`
	PresencePenalty  *float64           `json:"presence_penalty"`
	FrequencyPenalty *float64           `json:"frequency_penalty"`
	Stop             llm.Stop           `json:"stop"`
	User             string             `json:"user"`
}

// parseCompletions decodes and checks a legacy completions request body.
func parseCompletions(body []byte) (*llm.Request, *apiError) {
	var b completionsBody
	trimmed, a := decodeObject(body, &b)
	if a != nil {
		return nil, a
	}
	if b.Model == "" {
		return nil, invalidf("model", "missing required field: model (a model id such as \"ollama/qwen2.5-coder\"; GET /v1/models lists them)")
	}
	in, a := parseInputs("prompt", b.Prompt)
	if a == nil {
		a = checkCompletions(&b)
	}
	if a != nil {
		return nil, a
	}
	c := &llm.Completion{Prompts: in.texts}
	for _, t := range in.tokens {
		c.PromptTokens += len(t)
	}
	if b.Suffix != nil {
		c.Suffix = *b.Suffix
	}
	limit := defaultCompletionTokens
	if b.MaxTokens != nil {
		limit = *b.MaxTokens
	}
	return &llm.Request{Model: b.Model, Stream: b.Stream, StreamOptions: b.StreamOptions, MaxTokens: &limit,
		Stop: b.Stop, User: b.User, Body: trimmed, Completion: c,
		Native: &llm.Native{Format: llm.FormatCompletions, Body: trimmed}}, nil
}

// checkCompletions checks the ranges of a completions request, as OpenAI documents them.
func checkCompletions(b *completionsBody) *apiError {
	if b.StreamOptions != nil && !b.Stream {
		return invalidf("stream_options", "stream_options is only allowed when stream is true")
	}
	return firstError(
		checkIntRange("max_tokens", b.MaxTokens, 0, 1<<30),
		checkIntRange("logprobs", b.Logprobs, 0, 5),
		checkIntRange("n", b.N, 1, 128),
		checkIntRange("best_of", b.BestOf, 1, 20),
		checkRange("temperature", b.Temperature, 0, 2),
		checkRange("top_p", b.TopP, 0, 1),
		checkRange("presence_penalty", b.PresencePenalty, -2, 2),
		checkRange("frequency_penalty", b.FrequencyPenalty, -2, 2),
	)
}
