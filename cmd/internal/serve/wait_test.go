package serve

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// TestWaitForHandlers: Wait returns only once every handler has returned, also after Close,
// which does not wait for a handler still running; with none running it returns at once.
func TestWaitForHandlers(t *testing.T) {
	entered, release, returned := make(chan struct{}), make(chan struct{}), make(chan struct{})
	s := New(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(returned)
		close(entered)
		<-release // held like a handler blocked writing
	}), Limits{}, zerolog.Nop())
	if err := s.Wait(context.Background()); err != nil {
		t.Fatalf("Wait with no request: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }() // exits at Close
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, get); err != nil {
		t.Fatal(err)
	}
	<-entered
	_ = s.Close()
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait with a handler running = %v, want the context's deadline", err)
	}
	close(release)
	if err := s.Wait(context.Background()); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	select {
	case <-returned:
	default:
		t.Fatal("Wait returned before the handler did")
	}
}
