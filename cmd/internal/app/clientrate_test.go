package app

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestClientRateLimitSDK: a key made through the admin API with rate_limit rpm 1 has its
// call, and its next within the minute is answered, through the official OpenAI SDK, 429
// client_rate_limited with a Retry-After of about a minute (the fake provider's queue_timeout
// is shorter); a PATCH that lifts the limit lets it call again at once.
func TestClientRateLimitSDK(t *testing.T) {
	srv, _, _ := startTenants(t, filepath.Join(t.TempDir(), "tollgate.db"))
	var made struct {
		Secret string `json:"secret"`
	}
	admin(t, srv.URL, "POST", "/admin/keys", `{"name":"dave","rate_limit":{"rpm":1}}`, 201, &made)
	c := oai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey(made.Secret), option.WithMaxRetries(0))
	chat := func() error {
		_, err := c.Chat.Completions.New(context.Background(), oai.ChatCompletionNewParams{Model: "other/echo",
			Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("hello there")}})
		return err
	}
	if err := chat(); err != nil {
		t.Fatalf("dave's first call: %v", err)
	}
	var e *oai.Error
	if err := chat(); !errors.As(err, &e) || e.StatusCode != 429 || e.Code != "client_rate_limited" {
		t.Fatalf("dave's second call within the minute: %v", err)
	}
	if ra, err := strconv.Atoi(e.Response.Header.Get("Retry-After")); err != nil || ra < 55 || ra > 60 {
		t.Fatalf("Retry-After %q, want about 60 s", e.Response.Header.Get("Retry-After"))
	}
	admin(t, srv.URL, "PATCH", "/admin/keys/dave", `{"rate_limit":{"rpm":0}}`, 200, nil)
	if err := chat(); err != nil {
		t.Fatalf("dave's call once the limit is lifted: %v", err)
	}
}
