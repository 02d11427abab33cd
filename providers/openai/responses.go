package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/sse"
	"github.com/tollgate/tollgate/providers/upstream"
	"github.com/tollgate/tollgate/providers/wirejson"
)

// speaksResponses reports whether the backend serves OpenAI's Responses API itself, so a
// client's /v1/responses request is relayed as sent (llm.Native) instead of through chat.
// Only OpenAI's own API does so fully; the compatible servers that have /v1/responses
// (LM Studio, Ollama) serve a stateless subset, and chat is what they all speak well.
func (c *Client) speaksResponses() bool { return c.kind == KindOpenAI }

// openResponses relays a Responses request to {base}/responses with only "model" replaced.
// Like Open, it returns once the backend has answered with something of the answer, so an
// error it reports first — by status, in a 200 body, or as the stream's first events
// (error, response.failed) — comes back as an *llm.Error the gateway can still answer with.
func (c *Client) openResponses(ctx context.Context, req *llm.Request, n *llm.Native, key string) (llm.Stream, error) {
	model, err := json.Marshal(req.Model)
	if err != nil {
		return nil, fmt.Errorf("encode model: %w", err)
	}
	body, err := upstream.SetMember(n.Body, "model", func([]byte) []byte { return model })
	if err != nil {
		return nil, &llm.Error{Kind: llm.KindInvalidRequest, Provider: c.name, Message: "request body: " + err.Error(), Err: err}
	}
	resp, cancel, err := c.post(ctx, upstream.Call{Path: "/responses", Body: body, Key: key, Stream: req.Stream})
	if err != nil {
		return nil, err
	}
	if !req.Stream {
		b, err := c.up.Whole(ctx, resp, cancel, maxCompletion)
		if err != nil {
			return nil, err
		}
		return c.readResponse(resp.Header, b)
	}
	src := &responsesEvents{c: c, ctx: ctx, header: resp.Header, r: sse.NewReaderLimit(resp.Body, c.maxEvent)}
	s := upstream.NewChunkStream(c.name, resp.Body, cancel, src).WithQuota(resp.Header, c.now())
	if err := s.Prime(); err != nil {
		return nil, err
	}
	return s, nil
}

// readResponse reads a whole response object b, answered with headers h; one that failed is
// an error.
func (c *Client) readResponse(h http.Header, b []byte) (llm.Stream, error) {
	var ev responsesEvent
	if wirejson.Unmarshal(b, &ev.Response) != nil || ev.Response == nil || ev.Response.Object != "response" {
		return nil, c.upstreamError("backend answered 200 with a body that is not a response: "+c.snippet(b), nil)
	}
	ch := llm.Chunk{Raw: b, Complete: true, Format: llm.FormatResponses}
	if err := c.inspectResponse(h, &ev, &ch); err != nil {
		return nil, err
	}
	return upstream.Chunks([]llm.Chunk{ch}, io.EOF).WithQuota(h, c.now()), nil
}

// responsesEvent is the part of a Responses stream event the relay reads: enough to see
// the answer begin, its usage and its failures.
type responsesEvent struct {
	Type     string `json:"type"`
	Code     string `json:"code"`    // error
	Message  string `json:"message"` // error
	Delta    string `json:"delta"`
	Response *struct {
		Object string `json:"object"`
		Status string `json:"status"`
		Error  *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		Usage *struct {
			InputTokens        int `json:"input_tokens"`
			InputTokensDetails struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"input_tokens_details"`
			OutputTokens        int `json:"output_tokens"`
			OutputTokensDetails struct {
				ReasoningTokens int `json:"reasoning_tokens"`
			} `json:"output_tokens_details"`
			TotalTokens int `json:"total_tokens"`
		} `json:"usage"`
	} `json:"response"`
}

// inspectResponse fills ch's structured fields from what ev says, or returns the error it
// reports: an error event, or a response that failed.
func (c *Client) inspectResponse(h http.Header, ev *responsesEvent, ch *llm.Chunk) error {
	if ev.Type == "error" {
		return c.bodyError(h, backendError{code: ev.Code, msg: ev.Message})
	}
	r := ev.Response
	if r == nil {
		switch ev.Type {
		case "response.output_text.delta":
			ch.Content = ev.Delta
		case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
			ch.ReasoningContent = ev.Delta
		case "response.function_call_arguments.delta", "response.custom_tool_call_input.delta":
			ch.ToolCalls = []llm.ToolCallDelta{{Arguments: ev.Delta}}
		}
		return nil
	}
	switch r.Status {
	case "failed":
		be := backendError{code: "server_error", msg: "the response failed"}
		if r.Error != nil {
			be = backendError{code: r.Error.Code, msg: r.Error.Message}
		}
		return c.bodyError(h, be)
	case "completed":
		ch.FinishReason = llm.FinishStop
	case "incomplete":
		ch.FinishReason = llm.FinishLength
	}
	if u := r.Usage; u != nil {
		ch.Usage = &llm.Usage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens, TotalTokens: u.TotalTokens,
			CachedTokens: u.InputTokensDetails.CachedTokens, ReasoningTokens: u.OutputTokensDetails.ReasoningTokens}
	}
	return nil
}

// responsesEvents is a Responses stream as an upstream.Source: each event becomes one chunk
// carrying it as sent (Raw, Format, Event) and what it says in structured fields. The
// stream ends after its terminal event (response.completed, response.incomplete).
type responsesEvents struct {
	c      *Client
	ctx    context.Context
	header http.Header
	r      *sse.Reader
	done   bool
	events int
}

func (e *responsesEvents) Fill(out []llm.Chunk) ([]llm.Chunk, error) {
	if e.done {
		return out, io.EOF
	}
	ev, err := e.r.Next()
	if err != nil {
		if e.ctx.Err() != nil {
			return out, e.ctx.Err()
		}
		// Before its terminal event the answer is cut off (or never began): see EndError.
		le := upstream.EndError(err, e.events > 0, fmt.Sprintf("before response.completed, after %d events", e.events), e.c.secrets...)
		le.Provider = e.c.name
		return out, le
	}
	var re responsesEvent
	if err := decodeEvent(ev.Data, &re); err != nil {
		return out, e.c.upstreamError("backend sent a stream event that is not JSON: "+e.c.snippet(ev.Data), err)
	}
	e.events++
	name := ev.Type
	if name == "" || name == "message" {
		name = re.Type
	}
	ch := llm.Chunk{Raw: append([]byte(nil), ev.Data...), Format: llm.FormatResponses, Event: name}
	if err := e.c.inspectResponse(e.header, &re, &ch); err != nil {
		return out, err
	}
	switch re.Type {
	case "response.completed", "response.incomplete":
		e.done = true
	}
	return append(out, ch), nil
}
