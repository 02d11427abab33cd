package actors

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// TestClientRateLimit: a key's own tpm bucket (60000 a minute, all of it at once) holds its
// calls gateway-wide. A call that fits starts at once; one whose tokens are there within its
// provider's queue_timeout waits for them, and its queue wait says so; one whose tokens are
// not is answered client_rate_limited at once, its Retry-After the wait, and reaches no
// backend. Another key, and a key without a rate_limit, are not held.
func TestClientRateLimit(t *testing.T) {
	b := newHeld()
	p := testProvider("p", b, "m")
	p.Lanes, p.Models[0].Lanes, p.QueueTimeout = 4, 4, 10*time.Second
	g := newTestGateway(t, 10, 16, p)
	alice := llm.WithClient(context.Background(), llm.Client{Name: "alice", TPM: 60000})
	call := func(ctx context.Context, maxTokens int) chan result {
		ch := make(chan result, 1)
		go func() { // exits when Start returns
			req := &llm.Request{Model: "p/m", MaxTokens: &maxTokens, Messages: []llm.Message{{Role: "user", Content: llm.Content{Text: "hi"}}}}
			sv, err := g.Start(ctx, "p/m", llm.Normal, req)
			ch <- result{sv.Stream, sv.QueueWait, err}
		}()
		return ch
	}
	first := recv(t, call(alice, 59000)) // 59000 and its prompt: within the burst
	if first.err != nil || first.wait >= time.Second {
		t.Fatalf("the first call: waited %s, %v", first.wait, first.err)
	}
	c1 := b.next(t)
	second := call(alice, 1500) // at least 500 tokens past the bucket: 0.5 s at 1000 a second
	c2 := b.next(t)
	if r := recv(t, call(alice, 59000)); kindOf(t, r.err) != llm.KindClientRateLimited {
		t.Fatalf("a call whose tokens come past queue_timeout: %v", r.err)
	} else if ra := r.err.(*llm.Error).RetryAfter; ra < 50*time.Second {
		t.Fatalf("Retry-After %s, want the wait for 59000 tokens (about 59 s)", ra)
	}
	for _, ctx := range []context.Context{llm.WithClient(context.Background(), llm.Client{Name: "bob", TPM: 60000}), context.Background()} {
		r := call(ctx, 59000)
		close(b.next(t).release)
		res := recv(t, r)
		if res.err != nil || res.wait >= time.Second {
			t.Fatalf("another client waited %s: %v", res.wait, res.err)
		}
		if _, err := drain(t, res.stream); err != nil {
			t.Fatal(err)
		}
	}
	close(c1.release)
	close(c2.release)
	r2 := recv(t, second)
	if r2.err != nil || r2.wait < 500*time.Millisecond {
		t.Fatalf("the call that waited for its tokens: waited %s, %v", r2.wait, r2.err)
	}
	for _, s := range []llm.Stream{first.stream, r2.stream} {
		if _, err := drain(t, s); err != nil {
			t.Fatal(err)
		}
	}
	b.noCall(t)
	waitState(t, g, "idle", idle)
}

// TestClientRateLimitBatch: a batch takes one request per member from its key's rpm bucket
// (2 a minute, both at once), all or none: a batch of three is refused client_rate_limited
// and charged nothing, so a batch of two then starts; a third member's request is not there
// for half a minute.
func TestClientRateLimitBatch(t *testing.T) {
	g, held := batchGateway(t, 10)
	ctx := llm.WithClient(context.Background(), llm.Client{Name: "alice", RPM: 2})
	_, err := g.StartBatch(ctx, []string{"a/x", "b/z", "a/y"}, llm.Normal, batchReq())
	if kindOf(t, err) != llm.KindClientRateLimited || err.(*llm.Error).RetryAfter < 25*time.Second {
		t.Fatalf("three members at rpm 2: %v", err)
	}
	members, err := g.StartBatch(ctx, []string{"a/x", "b/z"}, llm.Normal, batchReq())
	if err != nil {
		t.Fatalf("two members after the refusal charged nothing: %v", err)
	}
	for range members {
		close(held.next(t).release)
	}
	for _, m := range members {
		if _, err := drain(t, m.Stream); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := g.StartBatch(ctx, []string{"a/y"}, llm.Normal, batchReq()); kindOf(t, err) != llm.KindClientRateLimited {
		t.Fatalf("a third request within the minute: %v", err)
	}
	held.noCall(t)
	waitState(t, g, "idle", idle)
}
