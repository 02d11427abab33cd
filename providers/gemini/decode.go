package gemini

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/tollgate/tollgate/providers/llm"
)

// generateResponse is a GenerateContentResponse: the whole answer of generateContent, or one
// event of streamGenerateContent. An error can take its place inside a stream.
type generateResponse struct {
	Candidates     []candidate `json:"candidates"`
	PromptFeedback *struct {
		BlockReason string `json:"blockReason"`
	} `json:"promptFeedback"`
	UsageMetadata *usageMetadata `json:"usageMetadata"`
	Error         *apiError      `json:"error"`
}

type candidate struct {
	Content *struct {
		Parts []struct {
			Text         string `json:"text"`
			Thought      bool   `json:"thought"`
			FunctionCall *struct {
				ID   string          `json:"id"`
				Name string          `json:"name"`
				Args json.RawMessage `json:"args"`
			} `json:"functionCall"`
		} `json:"parts"`
	} `json:"content"`
	FinishReason string `json:"finishReason"`
	Index        int    `json:"index"`
}

type usageMetadata struct {
	PromptTokenCount        int `json:"promptTokenCount"`
	CandidatesTokenCount    int `json:"candidatesTokenCount"`
	ThoughtsTokenCount      int `json:"thoughtsTokenCount"`
	CachedContentTokenCount int `json:"cachedContentTokenCount"`
	TotalTokenCount         int `json:"totalTokenCount"`
}

// toLLM counts thoughts as completion tokens, as OpenAI counts reasoning tokens.
func (u *usageMetadata) toLLM() *llm.Usage {
	completion := u.CandidatesTokenCount + u.ThoughtsTokenCount
	total := u.TotalTokenCount
	if total == 0 {
		total = u.PromptTokenCount + completion
	}
	return &llm.Usage{PromptTokens: u.PromptTokenCount, CompletionTokens: completion, TotalTokens: total,
		CachedTokens: u.CachedContentTokenCount, ReasoningTokens: u.ThoughtsTokenCount}
}

// finishReason maps Gemini's finishReason onto OpenAI's; called is whether the candidate
// made a function call, which Gemini reports as a plain STOP.
func finishReason(reason string, called bool) llm.FinishReason {
	switch reason {
	case "MAX_TOKENS":
		return llm.FinishLength
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY":
		return llm.FinishContentFilter
	}
	if called {
		return llm.FinishToolCalls
	}
	return llm.FinishStop // STOP, OTHER, LANGUAGE, MALFORMED_FUNCTION_CALL, unspecified
}

// decoder turns GenerateContentResponses into chunks, keeping what spans several of them:
// the tool call numbering, whether a candidate called a function, and the latest usage.
type decoder struct {
	errorf  func(*apiError) *llm.Error // builds the error for an error inside the answer
	started bool                       // the role chunk has been sent
	calls   int                        // function calls seen so far; numbers the next one
	called  map[int]bool               // candidate index → it made a function call
	usage   *usageMetadata
	done    bool // a finish reason (or a prompt block) was seen
}

func newDecoder(errorf func(*apiError) *llm.Error) *decoder {
	return &decoder{errorf: errorf, called: map[int]bool{}}
}

// event decodes one response object and appends the chunks it yields to out.
func (d *decoder) event(data []byte, out []llm.Chunk) ([]llm.Chunk, error) {
	var r generateResponse
	if err := json.Unmarshal(data, &r); err != nil {
		return out, &llm.Error{Kind: llm.KindUpstream, Message: "bad response chunk: " + err.Error(), Err: err}
	}
	if r.Error != nil {
		return out, d.errorf(r.Error)
	}
	if r.UsageMetadata != nil {
		d.usage = r.UsageMetadata
	}
	if !d.started {
		d.started = true
		out = append(out, llm.Chunk{Role: "assistant"})
	}
	for i := range r.Candidates {
		out = d.candidate(&r.Candidates[i], out)
	}
	if len(r.Candidates) == 0 && r.PromptFeedback != nil && r.PromptFeedback.BlockReason != "" {
		// The prompt itself was blocked: there is no answer, only the reason.
		d.done = true
		out = append(out, llm.Chunk{FinishReason: llm.FinishContentFilter})
	}
	return out, nil
}

func (d *decoder) candidate(c *candidate, out []llm.Chunk) []llm.Chunk {
	if c.Content != nil {
		for _, p := range c.Content.Parts {
			switch {
			case p.FunctionCall != nil:
				out = append(out, llm.Chunk{Index: c.Index, ToolCalls: []llm.ToolCallDelta{d.toolCall(p.FunctionCall.ID,
					p.FunctionCall.Name, p.FunctionCall.Args)}})
				d.called[c.Index] = true
			case p.Text == "":
			case p.Thought:
				out = append(out, llm.Chunk{Index: c.Index, ReasoningContent: p.Text})
			default:
				out = append(out, llm.Chunk{Index: c.Index, Content: p.Text})
			}
		}
	}
	if c.FinishReason != "" {
		d.done = true
		out = append(out, llm.Chunk{Index: c.Index, FinishReason: finishReason(c.FinishReason, d.called[c.Index])})
	}
	return out
}

// toolCall makes a complete tool call delta: Gemini sends each call whole. Calls without an
// id of their own get "call_<n>", unique within the answer.
func (d *decoder) toolCall(id, name string, args json.RawMessage) llm.ToolCallDelta {
	n := d.calls
	d.calls++
	if id == "" {
		id = "call_" + strconv.Itoa(n)
	}
	arguments := "{}"
	var buf bytes.Buffer
	if json.Compact(&buf, args) == nil && buf.String() != "null" {
		arguments = buf.String()
	}
	return llm.ToolCallDelta{Index: n, ID: id, Type: "function", Name: name, Arguments: arguments}
}

// finish ends the answer: the usage chunk, or an error when the backend stopped before
// saying why it finished (a truncated answer) or before answering at all.
func (d *decoder) finish(out []llm.Chunk) ([]llm.Chunk, error) {
	switch {
	case !d.started:
		return out, &llm.Error{Kind: llm.KindUpstream, Message: "the stream ended before any event of an answer"}
	case !d.done:
		return out, &llm.Error{Kind: llm.KindUpstreamTruncated, Message: "the answer ended without a finish reason"}
	}
	if d.usage != nil {
		out = append(out, llm.Chunk{UsageOnly: true, Usage: d.usage.toLLM()})
	}
	return out, nil
}

// decodeResponse decodes a whole generateContent answer into the chunks a stream of it would
// have yielded.
func decodeResponse(body []byte, errorf func(*apiError) *llm.Error) ([]llm.Chunk, error) {
	d := newDecoder(errorf)
	out, err := d.event(body, nil)
	if err != nil {
		return nil, err
	}
	out, err = d.finish(out)
	if err != nil {
		return nil, fmt.Errorf("gemini: %w", err)
	}
	return out, nil
}
