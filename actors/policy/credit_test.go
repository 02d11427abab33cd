package policy

import (
	"testing"
	"time"
)

// TestRecallVoidsCreditAtOnce: a recall for the provider's last offer takes its credit back
// before the owner offers (an owner may defer the offer behind the messages it already
// holds), so an arrival handled in between does not start on it; a recall for an earlier
// offer, which that offer already answered, leaves the credit of the later one alone.
func TestRecallVoidsCreditAtOnce(t *testing.T) {
	newCredited := func(t *testing.T) (*Provider, Offer) {
		p := NewProvider(ProviderSpec{Name: "p", Lanes: 4, QueueLength: 8, QueueTimeout: time.Minute,
			Models: []ModelSpec{{Name: "m", Lanes: 4}}})
		o := p.Offer(t0)
		if !p.TakeCredit(Credit{Epoch: o.Epoch, Seq: o.Seq, Ceiling: 4}) {
			t.Fatal("the credit for the last offer was not taken")
		}
		return p, o
	}
	t.Run("recall of the credit's offer", func(t *testing.T) {
		p, o := newCredited(t)
		if !p.Recall(Recall{Epoch: o.Epoch, Seq: o.Seq}) {
			t.Fatal("the recall did not take the credit back")
		}
		if st, ok := p.StartOnCredit(1, Arrival{Class: N}, t0); ok {
			t.Fatalf("started %+v on recalled credit", st)
		}
		if p.Quiet() {
			t.Fatal("quiet without credit: the owner would not offer")
		}
		if p.Recall(Recall{Epoch: o.Epoch, Seq: o.Seq}) {
			t.Fatal("a second recall took credit back again")
		}
	})
	t.Run("recall of an earlier offer", func(t *testing.T) {
		p, o := newCredited(t)
		p.Offer(t0) // gives the first credit back
		o2 := p.Offer(t0)
		if !p.TakeCredit(Credit{Epoch: o2.Epoch, Seq: o2.Seq, Ceiling: 4}) {
			t.Fatal("the credit for the last offer was not taken")
		}
		if p.Recall(Recall{Epoch: o.Epoch, Seq: o.Seq}) {
			t.Fatal("a recall of an answered offer took the later credit")
		}
		if _, ok := p.StartOnCredit(1, Arrival{Class: N}, t0); !ok {
			t.Fatal("the later credit was lost to a stale recall")
		}
	})
}
