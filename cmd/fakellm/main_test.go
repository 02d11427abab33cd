package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestRunServesUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { // exits when ctx is cancelled
		done <- run(ctx, []string{"--listen", "127.0.0.1:0", "--mode", "reasoning", "--models", "x,y", "--chunks", "2"}, pw)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	if !ok {
		t.Fatalf("first line %q", line)
	}
	go io.Copy(io.Discard, pr) // exits when pw is closed

	resp, err := http.Get("http://" + addr + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"id":"y"`) {
		t.Fatalf("models: %s", body)
	}
	resp, err = http.Post("http://"+addr+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"x","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"reasoning_content"`) {
		t.Fatalf("--mode reasoning not applied: %s", body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run returned %v after cancel", err)
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{{"--mode", "nope"}, {"--chunks", "x"}, {"--listen", "256.0.0.1:bad"}} {
		if err := run(context.Background(), args, io.Discard); err == nil {
			t.Errorf("run(%q) succeeded", args)
		}
	}
}
