package llm

import (
	"context"
	"testing"
)

func TestClientOf(t *testing.T) {
	if got := ClientOf(context.Background()); got != (Client{}) {
		t.Fatalf("ClientOf(no client) = %+v, want the anonymous client", got)
	}
	want := Client{Name: "alice", Weight: 2, MaxRunning: 4}
	if got := ClientOf(WithClient(context.Background(), want)); got != want {
		t.Fatalf("ClientOf = %+v, want %+v", got, want)
	}
	for _, tc := range []struct{ weight, share int }{{0, 1}, {-3, 1}, {1, 1}, {3, 3}} {
		if got := (Client{Weight: tc.weight}).Share(); got != tc.share {
			t.Errorf("Client{Weight: %d}.Share() = %d, want %d", tc.weight, got, tc.share)
		}
	}
}
