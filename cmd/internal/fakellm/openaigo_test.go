package fakellm

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// The official Go SDK must read our answers as it reads OpenAI's.

func sdkClient(t *testing.T, opts Options) (openai.Client, *Server) {
	srv := newTestServer(opts)
	ts := serve(t, srv)
	return openai.NewClient(option.WithBaseURL(ts.URL+"/v1"), option.WithAPIKey("test"),
		option.WithMaxRetries(0), option.WithHTTPClient(ts.Client())), srv
}

func TestOpenAISDKChat(t *testing.T) {
	client, srv := sdkClient(t, Options{Chunks: 6})
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{
		Model:    "fake-model",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("say hi, please")},
	}
	want := defaultReplyWords(6)

	got, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Choices) != 1 || got.Choices[0].Message.Content != want || got.Choices[0].FinishReason != "stop" ||
		got.Usage.PromptTokens != 3 || got.Usage.CompletionTokens != 6 || got.Usage.TotalTokens != 9 {
		t.Fatalf("non-streaming answer %+v", got)
	}

	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := client.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	chunks := 0
	for stream.Next() {
		acc.AddChunk(stream.Current())
		chunks++
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	stream.Close()
	// role chunk, 6 content chunks, finish chunk, usage chunk
	if chunks != 9 || acc.Choices[0].Message.Content != want || acc.Choices[0].FinishReason != "stop" ||
		acc.Usage.CompletionTokens != 6 || acc.Usage.PromptTokens != 3 {
		t.Fatalf("%d chunks accumulated to %+v", chunks, acc.ChatCompletion)
	}
	// The handler counts a call completed after its last write, which the client may read
	// first: poll with a deadline.
	deadline := time.Now().Add(2 * time.Second)
	for st := srv.Stats(); st.Completed != 2 || st.ClientGone != 0; st = srv.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v", st)
		}
		time.Sleep(time.Millisecond) // polling with a deadline
	}
}

func TestOpenAISDKErrors(t *testing.T) {
	client, _ := sdkClient(t, Options{})
	ctx := context.Background()
	tests := []struct {
		model  string
		status int
		code   string
	}{
		{"quirk-rate-limit", http.StatusTooManyRequests, "rate_limit_exceeded"},
		{"quirk-quota", http.StatusTooManyRequests, "insufficient_quota"},
		{"quirk-overloaded", http.StatusServiceUnavailable, "overloaded"},
	}
	for _, tt := range tests {
		_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: tt.model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != tt.status || apiErr.Code != tt.code {
			t.Errorf("%s: error %v, want status %d code %s", tt.model, err, tt.status, tt.code)
		}
	}

	// A mid-stream error object surfaces as a stream error.
	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model: "quirk-error-midstream", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}})
	n := 0
	for stream.Next() {
		n++
	}
	stream.Close()
	if stream.Err() == nil || n != 1+midstreamAfter {
		t.Fatalf("after %d chunks stream error %v, want an error after %d", n, stream.Err(), 1+midstreamAfter)
	}
}

func TestOpenAISDKResponses(t *testing.T) {
	client, _ := sdkClient(t, Options{Chunks: 5})
	ctx := context.Background()
	params := responses.ResponseNewParams{
		Model: "fake-model",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("say hi")},
	}
	want := defaultReplyWords(5)

	resp, err := client.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if resp.OutputText() != want || resp.Status != "completed" || resp.Usage.OutputTokens != 5 || resp.Usage.InputTokens != 2 {
		t.Fatalf("response %q %s %+v", resp.OutputText(), resp.Status, resp.Usage)
	}

	stream := client.Responses.NewStreaming(ctx, params)
	var text string
	var completed responses.Response
	var types []string
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta":
			text += ev.Delta
		case "response.completed":
			completed = ev.AsResponseCompleted().Response
		}
	}
	stream.Close()
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text != want || completed.OutputText() != want || completed.Usage.TotalTokens != 7 {
		t.Fatalf("streamed %q, completed %q usage %+v; events %v", text, completed.OutputText(), completed.Usage, types)
	}
}
