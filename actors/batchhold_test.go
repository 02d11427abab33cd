package actors

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// TestBatchStartsUnderSteadySingles: a batch that needs both of a provider's lanes, while
// three clients keep sending it single calls of the batch's class (each held 50 ms at the
// backend, so one always waits for the lane the next call frees), is refused, tries again
// after its Retry-After, is refused again, and then starts on its third try: its second
// refusal kept the lanes for it (policy/batchhold.go). Every single call is answered.
func TestBatchStartsUnderSteadySingles(t *testing.T) {
	held := newHeld()
	p := testProvider("s", held, "m")
	p.Lanes, p.Models[0].Lanes, p.QueueLength = 2, 2, 20
	g := newTestGateway(t, 10, 30, p)
	stop, clientsDone, pumped := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() { // releases every call 50 ms after it opened; exits once the clients have
		defer close(pumped)
		for {
			select {
			case c := <-held.opened:
				time.AfterFunc(50*time.Millisecond, func() { close(c.release) })
			case <-clientsDone:
				return
			}
		}
	}()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var singleErrs []error
	singles := 0
	for range 3 {
		wg.Go(func() { // one client's single calls, one after another; exits at stop
			for {
				select {
				case <-stop:
					return
				default:
				}
				sv, err := g.Start(context.Background(), "s/m", llm.Normal, batchReq())
				if err == nil {
					for _, err = sv.Stream.Next(); err == nil; _, err = sv.Stream.Next() {
					}
					_ = sv.Stream.Close()
				}
				mu.Lock()
				singles++
				if err != nil && !errors.Is(err, io.EOF) {
					singleErrs = append(singleErrs, err)
				}
				mu.Unlock()
			}
		})
	}
	waitState(t, g, "both lanes busy and a single call waiting", func(s AdminState) bool { return s.Running == 2 && s.Queued >= 1 })
	tries, started := 0, false
	for tries < 6 && !started {
		tries++
		members, err := g.StartBatch(context.Background(), []string{"s/m", "s/m"}, llm.Normal, batchReq())
		var e *llm.Error
		switch {
		case err == nil:
			started = true
			for _, m := range members {
				if _, err := drain(t, m.Stream); err != nil {
					t.Errorf("a member: %v", err)
				}
			}
		case errors.As(err, &e) && e.Kind == llm.KindBatchCapacity && e.RetryAfter > 0:
			t.Logf("try %d refused: %s (retry after %s)", tries, e.Message, e.RetryAfter)
			<-time.After(e.RetryAfter) // the client honours the Retry-After it was given
		default:
			t.Fatalf("try %d: %v, want batch_capacity_unavailable with a Retry-After", tries, err)
		}
	}
	close(stop)
	wg.Wait()
	close(clientsDone)
	<-pumped
	if !started {
		t.Fatalf("the batch never started in %d tries while single calls kept a lane busy", tries)
	}
	if tries > 3 {
		t.Errorf("the batch started on try %d, want 3 (two refusals, then the lanes kept for it)", tries)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(singleErrs) > 0 {
		t.Errorf("%d of %d single calls failed, the first: %v", len(singleErrs), singles, singleErrs[0])
	}
	waitState(t, g, "idle", idle)
}
