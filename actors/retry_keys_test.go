package actors

import (
	"context"
	"sync"
	"testing"

	"github.com/tollgate/tollgate/providers/llm"
)

// keyedDown is a backend with keys: it records the key of each call and answers the first
// fail of them provider-down (503), the others "ok".
type keyedDown struct {
	keys, fail int
	mu         sync.Mutex
	used       []int
}

func (b *keyedDown) Keys(string) int { return b.keys }

func (b *keyedDown) Open(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	return b.OpenWithKey(ctx, req, 0)
}

func (b *keyedDown) OpenWithKey(ctx context.Context, req *llm.Request, key int) (llm.Stream, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used = append(b.used, key)
	if len(b.used) <= b.fail {
		return nil, &llm.Error{Kind: llm.KindProviderUnavailable, Provider: "p", Key: key, Message: "503 down"}
	}
	return &okStream{}, nil
}

func (b *keyedDown) keysUsed() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]int(nil), b.used...)
}

// TestRetryNotMadeKeepsKeyTurn: the keys are used round-robin, one turn per attempt made.
// A failed attempt that is not retried (retries: 0 here) moves no turn, so the next call
// takes the next key; before the fix the retry's key was picked, moving the turn, before
// the decision not to retry, and the next call skipped a key.
func TestRetryNotMadeKeepsKeyTurn(t *testing.T) {
	b := &keyedDown{keys: 3, fail: 1}
	p := testProvider("p", b, "m")
	p.Keys = 3
	g := newTestGateway(t, 10, 16, p)
	ctx := context.Background()
	if r := recv(t, startAsync(ctx, g, "p/m", llm.Interactive)); llm.KindOf(r.err) != llm.KindProviderUnavailable {
		t.Fatalf("first call: %v, want its 503 (no retry)", r.err)
	}
	r := recv(t, startAsync(ctx, g, "p/m", llm.Interactive))
	if r.err != nil {
		t.Fatal(r.err)
	}
	if _, err := drain(t, r.stream); err != nil {
		t.Fatal(err)
	}
	if used := b.keysUsed(); len(used) != 2 || used[0] != 0 || used[1] != 1 {
		t.Fatalf("keys used %v, want [0 1]: one turn per attempt made", used)
	}
	waitState(t, g, "idle", idle)
}
