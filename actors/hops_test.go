package actors

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/tollgate/tollgate/providers/llm"
)

// messageLog records the type of every message posted to the gateway's mailboxes while on,
// but the state queries of the test's own idle checks.
type messageLog struct {
	mu    sync.Mutex
	on    bool
	types []string
}

func (l *messageLog) MailboxStarted()     {}
func (l *messageLog) MessageReceived(any) {}
func (l *messageLog) MailboxEmpty()       {}
func (l *messageLog) MessagePosted(m any) {
	if _, query := m.(*stateQuery); query {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.on {
		l.types = append(l.types, fmt.Sprintf("%T", m))
	}
}

func (l *messageLog) record(on bool) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.on = on
	seen := l.types
	l.types = nil
	return seen
}

// An uncontended call, once its provider holds standing credit, costs four mailbox
// messages: arrive, startCall, released, freed. No offer, no dispatch, no grants, and nothing
// for the request actor unless the client hangs up.
func TestUncontendedCallMessages(t *testing.T) {
	log := &messageLog{}
	g := newWatchedGateway(t, log, 10, 16, testProvider("p", instantBackend{}, "m"))
	call := func() {
		sv, err := g.Start(context.Background(), "p/m", llm.Normal, batchReq())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := drain(t, sv.Stream); err != nil {
			t.Fatal(err)
		}
		waitState(t, g, "idle", idle)
	}
	call() // the first call's grants bring the credit
	log.record(true)
	call()
	got := log.record(false)
	slices.Sort(got)
	want := []string{"*actors.arrive", "*actors.freed", "*actors.released", "*actors.startCall"}
	if !slices.Equal(got, want) {
		t.Fatalf("an uncontended call posted %v, want %v", got, want)
	}
}
