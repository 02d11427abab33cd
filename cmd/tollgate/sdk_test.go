package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

const demoConfig = `
providers:
  - name: demo
    kind: fake
    models:
      - id: echo
        reply: "Hello, 世界! 👋 from the demo."
      - id: thinker
        reply: "Forty-two."
        reasoning_text: "Let me think."
`

func sdkClient(url string) oai.Client {
	return oai.NewClient(option.WithBaseURL(url+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
}

func userParams(model string) oai.ChatCompletionNewParams {
	return oai.ChatCompletionNewParams{Model: model, Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("hi")}}
}

func TestSDKNonStreaming(t *testing.T) {
	g := startGateway(t, demoConfig, nil)
	c := sdkClient(g.URL)
	res, err := c.Chat.Completions.New(context.Background(), userParams("demo/echo"))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Choices[0].Message.Content; got != "Hello, 世界! 👋 from the demo." {
		t.Fatalf("content %q", got)
	}
	if res.Choices[0].FinishReason != "stop" || res.Usage.CompletionTokens == 0 {
		t.Fatalf("finish %q usage %+v", res.Choices[0].FinishReason, res.Usage)
	}
	g.waitIdle(t)
}

func TestSDKStreaming(t *testing.T) {
	g := startGateway(t, demoConfig, nil)
	c := sdkClient(g.URL)
	for _, usage := range []bool{false, true} {
		p := userParams("demo/thinker")
		if usage {
			p.StreamOptions = oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)}
		}
		s := c.Chat.Completions.NewStreaming(context.Background(), p)
		var text, reasoning strings.Builder
		var finish string
		var sawUsage bool
		chunks := 0
		for s.Next() {
			ch := s.Current()
			chunks++
			if len(ch.Choices) > 0 {
				text.WriteString(ch.Choices[0].Delta.Content)
				if f := ch.Choices[0].FinishReason; f != "" {
					finish = f
				}
				if r, ok := ch.Choices[0].Delta.JSON.ExtraFields["reasoning_content"]; ok {
					reasoning.WriteString(strings.Trim(r.Raw(), `"`))
				}
			}
			if ch.Usage.TotalTokens > 0 {
				sawUsage = true
				if len(ch.Choices) != 0 {
					t.Errorf("usage chunk carries choices")
				}
			}
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		if text.String() != "Forty-two." || reasoning.String() != "Let me think." || finish != "stop" || chunks < 4 {
			t.Fatalf("text %q reasoning %q finish %q chunks %d", text.String(), reasoning.String(), finish, chunks)
		}
		if sawUsage != usage {
			t.Fatalf("include_usage=%v but usage chunk seen=%v", usage, sawUsage)
		}
	}
	g.waitIdle(t)
}

func TestSDKUnknownModel(t *testing.T) {
	g := startGateway(t, demoConfig, nil)
	c := sdkClient(g.URL)
	_, err := c.Chat.Completions.New(context.Background(), userParams("demo/nope"))
	var apiErr *oai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("want *openai.Error, got %v", err)
	}
	if apiErr.StatusCode != 404 || apiErr.Code != "model_not_found" || !strings.Contains(apiErr.Message, "/v1/models") {
		t.Fatalf("status %d code %q message %q", apiErr.StatusCode, apiErr.Code, apiErr.Message)
	}
	// The streaming path reports the same error before any event.
	s := c.Chat.Completions.NewStreaming(context.Background(), userParams("nope/echo"))
	for s.Next() {
	}
	if !errors.As(s.Err(), &apiErr) || apiErr.Code != "model_not_found" {
		t.Fatalf("stream error %v", s.Err())
	}
}
