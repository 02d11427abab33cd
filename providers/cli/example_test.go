package cli_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/tollgate/tollgate/providers/cli"
	"github.com/tollgate/tollgate/providers/llm"
)

// A claude-cli provider as SPEC §8 configures it: the CLI on PATH, pointed at another
// Anthropic-compatible endpoint through env. Only PATH, HOME, locale and temp-dir basics
// are inherited from the gateway, so the key must be listed in Env.
func ExampleNew() {
	b, err := cli.New(cli.Config{
		Kind:      cli.KindClaude,
		Name:      "claude",
		Env:       map[string]string{"ANTHROPIC_BASE_URL": "http://127.0.0.1:9000", "ANTHROPIC_API_KEY": "from-config"},
		Models:    []string{"sonnet"},
		KillGrace: 3 * time.Second,
		OnStderr:  func(s string) { fmt.Println("claude stderr:", s) },
	})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // run_timeout
	defer cancel()
	s, err := b.Open(ctx, &llm.Request{Model: "sonnet", Messages: []llm.Message{
		{Role: "user", Content: llm.Content{Text: "say hi"}},
	}})
	if err != nil {
		fmt.Println(llm.KindOf(err)) // e.g. upstream_auth_failed, provider_unavailable
		return
	}
	defer s.Close() // returns once the CLI is reaped: give the lane back after this
	for {
		c, err := s.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			fmt.Println("failed:", err)
			return
		}
		fmt.Print(c.Content)
	}
}
