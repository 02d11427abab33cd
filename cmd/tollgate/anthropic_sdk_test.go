package main

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aopt "github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/tollgate/tollgate/cmd/internal/fakellm"
)

// TestAnthropicSDKAroundMessages: what anthropic-sdk-go reads beside a message. models.list
// pages through Anthropic's list shape with every field its types require; count_tokens
// resolves the model as /v1/messages does (a client model name through its pattern, an
// unknown one the same 404); answers and errors carry request-id, the id the SDK reports.
func TestAnthropicSDKAroundMessages(t *testing.T) {
	g, _ := startIngress(t, fakellm.Options{Reply: sdkReply, Chunks: 2})
	c := messagesClient(g.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	var ids []string
	pager := c.Models.ListAutoPaging(ctx, anthropic.ModelListParams{Limit: anthropic.Int(2)})
	for pager.Next() {
		m := pager.Current()
		ids = append(ids, m.ID)
		if miss := missingRequired(reflect.ValueOf(m), "model"); len(miss) > 0 || m.CreatedAt.IsZero() {
			t.Errorf("model %s lacks %v (created_at %v): %s", m.ID, miss, m.CreatedAt, m.RawJSON())
		}
	}
	var want []string
	oc := responsesClient(g.URL)
	list, err := oc.Models.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range list.Data {
		want = append(want, m.ID)
	}
	if err := pager.Err(); err != nil || len(ids) < 3 || !slices.Equal(ids, want) {
		t.Errorf("models.list: %v (%v), want the OpenAI list's %v, 2 a page", ids, err, want)
	}

	user := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello."))}
	n, err := c.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: messagesModels[0], Messages: user})
	if err != nil || n.InputTokens == 0 {
		t.Errorf("count_tokens %s: %+v, %v", messagesModels[0], n, err)
	}
	_, err = c.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: "nope/x", Messages: user})
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusNotFound || ae.RequestID == "" ||
		ae.RequestID != ae.Response.Header.Get("X-Request-Id") {
		t.Errorf("count_tokens of an unknown model: %v, want a 404 with its request id", err)
	}

	var res *http.Response
	if _, err := c.Messages.New(ctx, anthropic.MessageNewParams{Model: messagesModels[0], MaxTokens: 50, Messages: user},
		aopt.WithResponseInto(&res)); err != nil {
		t.Fatal(err)
	}
	if id := res.Header.Get("request-id"); id == "" || id != res.Header.Get("X-Request-Id") {
		t.Errorf("message: request-id %q, X-Request-Id %q", id, res.Header.Get("X-Request-Id"))
	}
	_, err = c.Messages.New(ctx, anthropic.MessageNewParams{Model: "nope/x", MaxTokens: 50, Messages: user})
	if !errors.As(err, &ae) || ae.RequestID == "" {
		t.Errorf("error of a message: %v, want the SDK to see its request id", err)
	}
	g.waitIdle(t)
}

// TestMessagesSDKRequiredFields: a Messages answer Tollgate builds itself (a chat backend's
// answer translated) carries each field anthropic-sdk-go's types mark required, whole and
// in the streamed message_start and content_block_start events.
func TestMessagesSDKRequiredFields(t *testing.T) {
	g, _ := startIngress(t, fakellm.Options{Reply: sdkReply, Chunks: 3})
	c := messagesClient(g.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	user := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Run ls."))}
	for name, p := range map[string]anthropic.MessageNewParams{
		"text":      {Model: messagesModels[0], MaxTokens: 100, Messages: user},
		"tool call": {Model: messagesModels[0], MaxTokens: 100, Messages: user, Tools: []anthropic.ToolUnionParam{bashTool}},
	} {
		t.Run(name, func(t *testing.T) {
			m, err := c.Messages.New(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if miss := missingRequired(reflect.ValueOf(m), "message"); len(miss) > 0 {
				t.Errorf("whole answer lacks %v: %s", miss, m.RawJSON())
			}
			s := c.Messages.NewStreaming(ctx, p)
			for s.Next() {
				ev := s.Current()
				var obj any
				switch ev.Type {
				case "message_start":
					obj = ev.Message
				case "content_block_start":
					obj = ev.ContentBlock
				default:
					continue
				}
				if miss := missingRequired(reflect.ValueOf(obj), ev.Type); len(miss) > 0 {
					t.Errorf("%s lacks %v: %s", ev.Type, miss, ev.RawJSON())
				}
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
		})
	}
	g.waitIdle(t)
}
