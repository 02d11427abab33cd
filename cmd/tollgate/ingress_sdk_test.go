package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aopt "github.com/anthropics/anthropic-sdk-go/v2/option"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/tollgate/tollgate/cmd/internal/fakellm"
)

// The official SDKs against /v1/responses and /v1/messages: openai-go's
// Responses.New and NewStreaming, anthropic-sdk-go's Messages.New and NewStreaming, each
// against a backend that speaks chat (the request is translated both ways) and one that
// speaks the client's own format (relayed as sent). fakellm plays the backend in tool-call
// mode: a request offering a shell tool is answered with a call of it, a request holding the
// tool's output with text saying it came back.

// ingressConfig serves fakellm at url three ways: "chat" speaks Chat Completions (kind
// ollama: one lane, queue places queue), "oai" is an OpenAI backend (Responses relayed),
// "ant" an Anthropic one (Messages relayed). Client model names reach "chat" through
// patterns, as Codex's and Claude Code's would.
func ingressConfig(url string, queue int) string {
	return fmt.Sprintf(`
limits: {retry_after: 2s}
providers:
  - name: chat
    kind: ollama
    base_url: %[1]s/v1
    lanes: 1
    queue_length: %[2]d
    models:
      - id: fake-model
        aliases: ["gpt-5*", "claude-*"]
  - name: oai
    kind: openai
    base_url: %[1]s/v1
    keys: [test-key]
    models: [{id: fake-model}]
  - name: ant
    kind: anthropic
    base_url: %[1]s
    keys: [test-key]
    models: [{id: fake-model}]
`, url, queue)
}

// startIngress serves fakellm (tool-call mode, a short reply) and a gateway in front of it.
// "chat" has one queue place: a client that sends its next call the moment it has its
// answer may arrive before the provider has counted the lane free (the lane's message on
// its way), and is then queued for that moment rather than refused.
func startIngress(t *testing.T, opts fakellm.Options) (*gateway, *fakellm.Server) {
	return startIngressQueue(t, opts, 1)
}

// startIngressQueue is startIngress with queue places for "chat".
func startIngressQueue(t *testing.T, opts fakellm.Options, queue int) (*gateway, *fakellm.Server) {
	t.Helper()
	opts.Modes |= fakellm.ModeToolCall
	fake := fakellm.New(opts)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	return startGateway(t, ingressConfig(srv.URL, queue), nil), fake
}

// ingressModels are the model names the SDK tests ask for: one the gateway translates, one
// it relays.
var (
	responsesModels = []string{"gpt-5-codex", "oai/fake-model"}
	messagesModels  = []string{"claude-sonnet-4-5-20250929", "ant/fake-model"}
)

const sdkReply = "Hello from the backend, through the toll gate."

func responsesClient(url string, opts ...option.RequestOption) oai.Client {
	return oai.NewClient(append([]option.RequestOption{option.WithBaseURL(url + "/v1"), option.WithAPIKey("unused"),
		option.WithMaxRetries(0)}, opts...)...)
}

func messagesClient(url string, opts ...aopt.RequestOption) anthropic.Client {
	return anthropic.NewClient(append([]aopt.RequestOption{aopt.WithBaseURL(url), aopt.WithAPIKey("unused"),
		aopt.WithMaxRetries(0)}, opts...)...)
}

// execTool is the shell tool a Codex-like client offers.
var execTool = responses.ToolParamOfFunction("exec_command", map[string]any{
	"type": "object", "properties": map[string]any{"cmd": map[string]any{"type": "string"}}, "required": []string{"cmd"},
}, false)

func TestResponsesSDK(t *testing.T) {
	g, _ := startIngress(t, fakellm.Options{Reply: sdkReply, Chunks: 5})
	c := responsesClient(g.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, model := range responsesModels {
		t.Run(model, func(t *testing.T) {
			// Text, whole.
			res, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: model, Instructions: oai.String("Be brief."),
				Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("Say hello.")}})
			if err != nil {
				t.Fatal(err)
			}
			if res.OutputText() != sdkReply || res.Status != "completed" || res.Usage.OutputTokens == 0 {
				t.Errorf("New: text %q status %q usage %+v", res.OutputText(), res.Status, res.Usage)
			}

			// Text, streamed, with reasoning summaries.
			p := responses.ResponseNewParams{Model: model, Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("Say hello.")},
				Reasoning: oai.ReasoningParam{Effort: oai.ReasoningEffortLow, Summary: oai.ReasoningSummaryAuto}}
			ev := readResponses(t, c.Responses.NewStreaming(ctx, p))
			if ev.text != sdkReply || ev.reasoning == "" || ev.completed.Status != "completed" || ev.completed.Usage.TotalTokens == 0 {
				t.Errorf("NewStreaming: text %q reasoning %q completed %q usage %+v; events %v",
					ev.text, ev.reasoning, ev.completed.Status, ev.completed.Usage, ev.types)
			}
			for _, want := range []string{"response.created", "response.output_item.added", "response.output_text.delta", "response.output_item.done", "response.completed"} {
				if !ev.saw[want] {
					t.Errorf("NewStreaming: no %s event in %v", want, ev.types)
				}
			}

			// A tool call round trip, streamed: the call, then its output sent back.
			input := responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage("List the files.", responses.EasyInputMessageRoleUser)}
			p = responses.ResponseNewParams{Model: model, Tools: []responses.ToolUnionParam{execTool},
				Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input}}
			ev = readResponses(t, c.Responses.NewStreaming(ctx, p))
			if len(ev.calls) != 1 || ev.calls[0].Name != "exec_command" || !strings.Contains(ev.calls[0].Arguments.OfString, fakellm.ToolCommand) {
				t.Fatalf("tool call: %+v; events %v", ev.calls, ev.types)
			}
			call := ev.calls[0]
			out := responses.ResponseInputItemParamOfFunctionCallOutput(fakellm.ToolMarker + "\n")
			out.OfFunctionCallOutput.CallID = oai.String(call.CallID)
			p.Input.OfInputItemList = append(input,
				responses.ResponseInputItemParamOfFunctionCall(call.Arguments.OfString, call.CallID, call.Name), out)
			ev = readResponses(t, c.Responses.NewStreaming(ctx, p))
			if ev.text != fakellm.ToolDoneReply {
				t.Errorf("after the tool output: %q, want %q", ev.text, fakellm.ToolDoneReply)
			}
		})
	}
	g.waitIdle(t)
}

// responsesEvents is what a Responses stream carried.
type responsesEvents struct {
	text, reasoning string
	calls           []responses.ResponseOutputItemUnion
	completed       responses.Response
	types           []string
	saw             map[string]bool
}

func readResponses(t *testing.T, s interface {
	Next() bool
	Current() responses.ResponseStreamEventUnion
	Err() error
}) responsesEvents {
	t.Helper()
	r := responsesEvents{saw: map[string]bool{}}
	var text, reasoning strings.Builder
	for s.Next() {
		ev := s.Current()
		if !r.saw[ev.Type] {
			r.types = append(r.types, ev.Type)
		}
		r.saw[ev.Type] = true
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.reasoning_summary_text.delta":
			reasoning.WriteString(ev.Delta)
		case "response.output_item.done":
			if ev.Item.Type == "function_call" {
				r.calls = append(r.calls, ev.Item)
			}
		case "response.completed":
			r.completed = ev.Response
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	r.text, r.reasoning = text.String(), reasoning.String()
	return r
}

// bashTool is the shell tool a Claude-Code-like client offers.
var bashTool = anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{Name: "Bash", Description: anthropic.String("Run a command."),
	InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"command": map[string]any{"type": "string"}}, Required: []string{"command"}}}}

func TestMessagesSDK(t *testing.T) {
	g, _ := startIngress(t, fakellm.Options{Reply: sdkReply, Chunks: 5})
	c := messagesClient(g.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, model := range messagesModels {
		t.Run(model, func(t *testing.T) {
			user := anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello."))
			// Text, whole.
			m, err := c.Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 256,
				System: []anthropic.TextBlockParam{{Text: "Be brief."}}, Messages: []anthropic.MessageParam{user}})
			if err != nil {
				t.Fatal(err)
			}
			if text := messageText(m); text != sdkReply || m.StopReason != anthropic.StopReasonEndTurn || m.Usage.OutputTokens == 0 {
				t.Errorf("New: %q stop %q usage %+v", text, m.StopReason, m.Usage)
			}

			// Text, streamed, with thinking.
			p := anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 4096, Messages: []anthropic.MessageParam{user},
				Thinking: anthropic.ThinkingConfigParamOfEnabled(2048)}
			acc, types := readMessages(t, c.Messages.NewStreaming(ctx, p))
			thinking := ""
			for _, b := range acc.Content {
				if b.Type == "thinking" {
					thinking += b.Thinking
				}
			}
			if messageText(acc) != sdkReply || thinking == "" || acc.StopReason != anthropic.StopReasonEndTurn || acc.Usage.OutputTokens == 0 {
				t.Errorf("NewStreaming: text %q thinking %q stop %q usage %+v; events %v",
					messageText(acc), thinking, acc.StopReason, acc.Usage, types)
			}
			for _, want := range []string{"message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"} {
				if !strings.Contains(types, want) {
					t.Errorf("NewStreaming: no %s event in %s", want, types)
				}
			}

			// A tool_use round trip, streamed.
			list := anthropic.NewUserMessage(anthropic.NewTextBlock("List the files."))
			p = anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 256, Tools: []anthropic.ToolUnionParam{bashTool},
				Messages: []anthropic.MessageParam{list}}
			acc, types = readMessages(t, c.Messages.NewStreaming(ctx, p))
			var use *anthropic.ContentBlockUnion
			for i, b := range acc.Content {
				if b.Type == "tool_use" {
					use = &acc.Content[i]
				}
			}
			if use == nil || use.Name != "Bash" || !strings.Contains(string(use.Input), fakellm.ToolCommand) || acc.StopReason != anthropic.StopReasonToolUse {
				t.Fatalf("tool_use: %+v stop %q; events %s", acc.Content, acc.StopReason, types)
			}
			p.Messages = append(p.Messages, acc.ToParam(),
				anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, fakellm.ToolMarker+"\n", false)))
			acc, _ = readMessages(t, c.Messages.NewStreaming(ctx, p))
			if messageText(acc) != fakellm.ToolDoneReply {
				t.Errorf("after the tool result: %q, want %q", messageText(acc), fakellm.ToolDoneReply)
			}
		})
	}
	g.waitIdle(t)
}

func messageText(m *anthropic.Message) string {
	var b strings.Builder
	for _, c := range m.Content {
		if c.Type == "text" {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// readMessages accumulates a Messages stream as the SDK does; types lists its event types.
func readMessages(t *testing.T, s interface {
	Next() bool
	Current() anthropic.MessageStreamEventUnion
	Err() error
}) (*anthropic.Message, string) {
	t.Helper()
	acc := &anthropic.Message{}
	var types []string
	for s.Next() {
		ev := s.Current()
		if len(types) == 0 || types[len(types)-1] != ev.Type {
			types = append(types, ev.Type)
		}
		if err := acc.Accumulate(ev); err != nil {
			t.Fatalf("accumulate %s: %v", ev.Type, err)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	return acc, strings.Join(types, " ")
}

// statusTap records the statuses an SDK's calls got and closes busy at the first 429.
type statusTap struct {
	mu       sync.Mutex
	statuses []int
	busy     chan struct{}
	once     sync.Once
}

func (s *statusTap) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.statuses = append(s.statuses, resp.StatusCode)
	s.mu.Unlock()
	if resp.StatusCode == http.StatusTooManyRequests {
		s.once.Do(func() { close(s.busy) })
	}
	return resp, nil
}

func (s *statusTap) seen() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.statuses...)
}

// TestIngressSDKRetryAfter: with the one lane of "chat" taken and no queue, a call is
// refused 429 with Retry-After; each SDK waits and retries on its own, and the retry,
// made once the lane is free, succeeds.
func TestIngressSDKRetryAfter(t *testing.T) {
	// The occupying call's answer is long (400 chunks 50 ms apart); it is cancelled as soon
	// as the SDK has been refused, so the lane is free well before the 2 s Retry-After.
	g, _ := startIngressQueue(t, fakellm.Options{Chunks: 400, ChunkInterval: 50 * time.Millisecond}, 0)
	for _, api := range []struct {
		name string
		call func(ctx context.Context, hc *http.Client) (string, error)
	}{
		{"responses", func(ctx context.Context, hc *http.Client) (string, error) {
			c := responsesClient(g.URL, option.WithHTTPClient(hc), option.WithMaxRetries(2))
			res, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-5-codex",
				Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("hi")}})
			if err != nil {
				return "", err
			}
			return res.OutputText(), nil
		}},
		{"messages", func(ctx context.Context, hc *http.Client) (string, error) {
			c := messagesClient(g.URL, aopt.WithHTTPClient(hc), aopt.WithMaxRetries(2))
			m, err := c.Messages.New(ctx, anthropic.MessageNewParams{Model: "claude-haiku-4-5", MaxTokens: 64,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
			if err != nil {
				return "", err
			}
			return messageText(m), nil
		}},
	} {
		t.Run(api.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			occupy, stop := context.WithCancel(ctx)
			defer stop()
			held := make(chan error, 1)
			go func() { // ends when stop cancels the call
				req, _ := http.NewRequestWithContext(occupy, "POST", g.URL+"/v1/chat/completions",
					strings.NewReader(`{"model":"chat/fake-model","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
				res, err := rawClient.Do(req)
				if err == nil {
					_, err = io.Copy(io.Discard, res.Body)
					res.Body.Close()
				}
				held <- err
			}()
			deadline := time.Now().Add(5 * time.Second)
			for g.Gateway.State().Running != 1 {
				if time.Now().After(deadline) {
					t.Fatal("the occupying call never started")
				}
				time.Sleep(time.Millisecond) // polling with a deadline
			}
			tap := &statusTap{busy: make(chan struct{})}
			go func() { // ends at the first 429 or with the test
				select {
				case <-tap.busy:
					stop()
				case <-ctx.Done():
				}
			}()
			text, err := api.call(ctx, &http.Client{Transport: tap})
			if err != nil {
				t.Fatalf("call: %v (statuses %v)", err, tap.seen())
			}
			if got := tap.seen(); len(got) != 2 || got[0] != 429 || got[1] != 200 || text == "" {
				t.Errorf("statuses %v, text %q; want [429 200] and an answer", got, text)
			}
			<-held
			g.waitIdle(t)
		})
	}
}

// TestIngressSDKErrors: each SDK reads the gateway's refusals in its own API's error shape,
// with Tollgate's code and the field named.
func TestIngressSDKErrors(t *testing.T) {
	g, _ := startIngress(t, fakellm.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	rc := responsesClient(g.URL)
	for _, tc := range []struct {
		p           responses.ResponseNewParams
		status      int
		code, param string
		messageSays string
	}{
		{responses.ResponseNewParams{Model: "nope/x", Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("hi")}},
			404, "model_not_found", "model", "/v1/models"},
		{responses.ResponseNewParams{Model: "gpt-5-codex", PreviousResponseID: oai.String("resp_1"),
			Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("hi")}},
			400, "invalid_request", "previous_response_id", "stores no responses"},
	} {
		_, err := rc.Responses.New(ctx, tc.p)
		var e *oai.Error
		if !errors.As(err, &e) || e.StatusCode != tc.status || e.Code != tc.code || e.Param != tc.param || !strings.Contains(e.Message, tc.messageSays) {
			t.Errorf("Responses.New(%s): %v; want %d %s naming %s", tc.p.Model, err, tc.status, tc.code, tc.param)
		}
	}

	mc := messagesClient(g.URL)
	user := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}
	for _, tc := range []struct {
		p                      anthropic.MessageNewParams
		opt                    aopt.RequestOption
		status                 int
		typ, code, messageSays string
	}{
		{anthropic.MessageNewParams{Model: "nope/x", MaxTokens: 5, Messages: user}, nil, 404, "not_found_error", "model_not_found", "/v1/models"},
		// This SDK version has no temperature field; the wire still has it.
		{anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 5, Messages: user}, aopt.WithJSONSet("temperature", 1.5),
			400, "invalid_request_error", "invalid_request", "temperature must be between 0 and 1"},
	} {
		var opts []aopt.RequestOption
		if tc.opt != nil {
			opts = append(opts, tc.opt)
		}
		_, err := mc.Messages.New(ctx, tc.p, opts...)
		var e *anthropic.Error
		if !errors.As(err, &e) || e.StatusCode != tc.status || string(e.Type()) != tc.typ ||
			!strings.Contains(e.RawJSON(), `"code":"`+tc.code+`"`) || !strings.Contains(e.Message, tc.messageSays) {
			t.Errorf("Messages.New(%s): %v (%s); want %d %s with code %s", tc.p.Model, err, rawOf(e), tc.status, tc.typ, tc.code)
		}
	}
}

func rawOf(e *anthropic.Error) string {
	if e == nil {
		return ""
	}
	return e.RawJSON()
}
