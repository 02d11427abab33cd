package actors

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tollgate/tollgate/providers/llm"
)

// noSupervisor is the actor.Supervisor a strategy is handed, for a strategy called directly.
type noSupervisor struct{}

func (noSupervisor) Children() []*actor.PID        { return nil }
func (noSupervisor) EscalateFailure(any, any)      {}
func (noSupervisor) RestartChildren(...*actor.PID) {}
func (noSupervisor) StopChildren(...*actor.PID)    {}
func (noSupervisor) ResumeChildren(...*actor.PID)  {}

// TestSupervisionAnswersARetryAskOnce: a provider actor that answered a retryAsk and then
// failed in the same step (its offer) leaves the ask's one-slot reply full; the
// supervisor's strategy, answering the ask again, must not block on it. Before the fix the
// supervisor blocked for good, and with it the whole gateway's admission.
func TestSupervisionAnswersARetryAskOnce(t *testing.T) {
	g := newTestGateway(t, 10, 16, testProvider("p", newHeld(), "m"))
	s := &supervisor{g: g} // a child it does not know: the strategy only answers the message
	reply := make(chan retryAnswer, 1)
	reply <- retryAnswer{err: &llm.Error{Kind: llm.KindUpstream, Message: "the actor's answer"}}
	ask := &retryAsk{c: &call{}, reply: reply}
	done := make(chan struct{})
	go func() { // exits when the strategy returns
		defer close(done)
		s.HandleFailure(g.system, noSupervisor{}, actor.NewPID("nowhere", "gone"), actor.NewRestartStatistics(), "offer failed", ask)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the supervisor's strategy blocked answering a retryAsk answered already")
	}
	if ans := <-reply; llm.KindOf(ans.err) != llm.KindUpstream {
		t.Fatalf("the reply holds %+v, want the actor's own answer", ans)
	}
}
