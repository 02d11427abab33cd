package policy

import (
	"errors"
	"slices"
	"testing"
)

func newTestSupervisor(providers, maxRunning int, credit bool) *Supervisor {
	return NewSupervisor(SupervisorSpec{Limits: Limits{MaxRunning: maxRunning, MaxAdmitted: 2 * maxRunning}, Providers: providers,
		Slots: NewSlots(nil), Shares: NewShares(), Credit: credit})
}

// waiting is an offer of n interactive starts under generation sync.
func waiting(sync uint64, seq uint64, n int) Offer {
	o := Offer{Sync: sync, Seq: seq, Queued: n, QueueLength: 8}
	o.Avail[0] = n
	return o
}

// TestSupervisorDispatch: an offer asks for one dispatch, however many come before it is
// made; the dispatch sends each provider its grants in one part, and asks again only after.
func TestSupervisorDispatch(t *testing.T) {
	s := newTestSupervisor(3, 2, false)
	if fx := s.Offer(0, Offer{}); fx.Dispatch {
		t.Error("an offer with nothing to start asked for a dispatch")
	}
	if fx := s.Offer(1, waiting(0, 1, 1)); !fx.Dispatch {
		t.Fatal("an offer that could start asked for no dispatch")
	}
	if fx := s.Offer(2, waiting(0, 1, 3)); fx.Dispatch {
		t.Error("a second dispatch asked for before the first was made")
	}
	fx := s.DispatchNow()
	var got []int
	n := 0
	for _, g := range fx.Grants {
		got = append(got, g.Provider)
		n += len(g.Grants)
		for _, gr := range g.Grants {
			if gr.Provider != g.Provider {
				t.Errorf("provider %d's part holds a grant for %d", g.Provider, gr.Provider)
			}
		}
	}
	if n != 2 || !slices.Equal(got, []int{1, 2}) {
		t.Errorf("dispatch granted %d starts to providers %v, want 2 (max_running) to [1 2], one part each", n, got)
	}
	if fx := s.DispatchNow(); len(fx.Grants) != 0 {
		t.Errorf("a second dispatch granted %v past max_running", fx.Grants)
	}
	if fx := s.Offer(1, Offer{Seq: 2, Seen: 1}); !fx.Dispatch {
		t.Error("a finish that frees room for a waiting start asked for no dispatch")
	}
}

// TestSupervisorRebuild: a rebuild asks every provider for a fresh offer under a new
// generation, arms one resync, ignores offers and ticks of the old generation, and asks
// again only those that have not answered.
func TestSupervisorRebuild(t *testing.T) {
	s := newTestSupervisor(3, 4, false)
	s.Offer(0, waiting(0, 1, 1))
	fx := s.Rebuild()
	if fx.Sync != 1 || s.Sync() != 1 || !slices.Equal(fx.Resync, []int{0, 1, 2}) || !fx.ArmResync || fx.Dispatch {
		t.Fatalf("rebuild: %+v, want sync 1, every provider asked, one resync armed, no dispatch", fx)
	}
	if fx := s.Offer(0, waiting(0, 2, 1)); fx.Dispatch {
		t.Error("an offer for the old generation asked for a dispatch")
	}
	s.Offer(0, Offer{Sync: 1})
	if fx := s.ResyncTick(0); len(fx.Resync) != 0 || fx.ArmResync {
		t.Errorf("a tick of the old generation did %+v", fx)
	}
	if fx := s.ResyncTick(1); !slices.Equal(fx.Resync, []int{1, 2}) || !fx.ArmResync {
		t.Errorf("tick: %+v, want providers 1 and 2 asked again and the resync armed again", fx)
	}
	if fx := s.Offer(1, Offer{Sync: 1}); fx.Dispatch {
		t.Error("a dispatch asked for before every provider answered")
	}
	if fx := s.Offer(2, waiting(1, 1, 1)); !fx.Dispatch {
		t.Errorf("the last answer: %+v, want a dispatch", fx)
	}
	if fx := s.ResyncTick(1); len(fx.Resync) != 0 || fx.ArmResync {
		t.Errorf("a tick after every provider answered did %+v", fx)
	}
}

// TestSupervisorDrain: the drain tells every provider in service once, and is over when
// each has said it has nothing left; a retired provider has nothing, and one a reload adds
// during the drain drains at once.
func TestSupervisorDrain(t *testing.T) {
	s := newTestSupervisor(3, 4, false)
	if _, ok := s.Retire(1); !ok {
		t.Fatal("retire refused")
	}
	if _, ok := s.Retire(1); ok {
		t.Error("a provider retired twice")
	}
	if !s.isRetired(1) || s.isRetired(0) || s.isRetired(7) {
		t.Error("isRetired reports the wrong providers")
	}
	fx := s.Drain()
	if !slices.Equal(fx.Drain, []int{0, 2}) || fx.Idle {
		t.Fatalf("drain: %+v, want providers 0 and 2 told, not idle", fx)
	}
	if fx := s.Drain(); len(fx.Drain) != 0 {
		t.Errorf("a second drain told %v again", fx.Drain)
	}
	if fx := s.Reconfigure(Limits{MaxRunning: 4, MaxAdmitted: 8}, 4); !slices.Equal(fx.Drain, []int{3}) {
		t.Errorf("a provider added during the drain: told %v, want [3]", fx.Drain)
	}
	if fx := s.ProviderIdle(0); fx.Idle {
		t.Error("idle with providers 2 and 3 still busy")
	}
	if fx := s.ProviderIdle(9); fx.Idle {
		t.Error("an unknown provider's idle ended the drain")
	}
	s.ProviderIdle(2)
	if fx := s.ProviderIdle(3); !fx.Idle {
		t.Error("not idle once every provider said so")
	}
}

// TestSupervisorBatch: a batch holds its slots whole or not at all, asks each of its
// providers once, and is decided by the last answer: committed when all reserved, failed
// with the first refusal otherwise, those that reserved told to commit or free.
func TestSupervisorBatch(t *testing.T) {
	s := newTestSupervisor(3, 3, false)
	for p := range 3 {
		s.Offer(p, Offer{})
	}
	if fx := s.BeginBatch(1, []int{0, 1, 0, 2}); !slices.Equal(fx.Decided, []BatchDecision{{ID: 1, Outcome: BatchRefused}}) {
		t.Errorf("4 members under max_running 3: %+v, want refused", fx.Decided)
	}
	fx := s.BeginBatch(2, []int{2, 0, 2})
	if !slices.Equal(fx.Reserve, []BatchSend{{Provider: 0, ID: 2}, {Provider: 2, ID: 2}}) || len(fx.Decided) != 0 {
		t.Fatalf("3 members: %+v, want providers 0 and 2 asked, undecided", fx)
	}
	if fx := s.BeginBatch(3, []int{1}); len(fx.Decided) != 1 || fx.Decided[0].Outcome != BatchRefused || s.Running() != 3 {
		t.Errorf("a batch past the held slots: %+v, running %d; want refused, 3", fx.Decided, s.Running())
	}
	if fx := s.Reserved(2, 2, true, nil, Offer{Running: 2}); len(fx.Decided) != 0 || len(fx.Settle) != 0 {
		t.Errorf("the first answer decided: %+v", fx)
	}
	if fx := s.Reserved(2, 2, false, errors.New("again"), Offer{Running: 2}); len(fx.Decided) != 0 || len(fx.Settle) != 0 {
		t.Errorf("an answer again decided: %+v", fx)
	}
	fx = s.Reserved(2, 0, true, nil, Offer{Running: 1})
	if !slices.Equal(fx.Settle, []BatchSend{{Provider: 2, ID: 2, Commit: true}, {Provider: 0, ID: 2, Commit: true}}) ||
		!slices.Equal(fx.Decided, []BatchDecision{{ID: 2, Outcome: BatchCommitted}}) || s.Running() != 3 {
		t.Errorf("the last answer: %+v, running %d; want both committed, the batch committed, 3 running", fx, s.Running())
	}
	s.Offer(0, Offer{})
	s.Offer(2, Offer{})

	why := errors.New("lanes busy")
	s.BeginBatch(4, []int{0, 1})
	s.Reserved(4, 1, false, why, Offer{})
	fx = s.Reserved(4, 0, true, nil, Offer{Running: 1})
	if !slices.Equal(fx.Settle, []BatchSend{{Provider: 0, ID: 4}}) || len(fx.Decided) != 1 || fx.Decided[0].Outcome != BatchFailed ||
		fx.Decided[0].Why != why {
		t.Errorf("one refusal: %+v, want provider 0 told to free, the batch failed with the refusal", fx)
	}
	if fx := s.Reserved(4, 0, true, nil, Offer{}); len(fx.Decided) != 0 || len(fx.Settle) != 1 || fx.Settle[0].Commit {
		t.Errorf("an answer again for a decided batch: %+v, want only its reservation freed", fx)
	}
}

// TestSupervisorBatchParked: a batch waits (parked) while the dispatcher is rebuilt or its
// credit may hold the slots, begins once it can, and a rebuild, the drain or the gateway's
// failure answers what waits.
func TestSupervisorBatchParked(t *testing.T) {
	s := newTestSupervisor(2, 4, false)
	s.Offer(0, Offer{})
	s.Offer(1, Offer{})
	s.BeginBatch(1, []int{0, 1})
	fx := s.Rebuild()
	if !slices.Equal(fx.Decided, []BatchDecision{{ID: 1, Outcome: BatchForgotten}}) {
		t.Errorf("a rebuild: %+v, want the batch being admitted forgotten", fx.Decided)
	}
	if fx := s.Reserved(1, 0, true, nil, Offer{Sync: 1, Running: 1}); !slices.Equal(fx.Settle, []BatchSend{{Provider: 0, ID: 1}}) {
		t.Errorf("a late reservation of a forgotten batch: %+v, want it freed", fx.Settle)
	}
	if fx := s.BeginBatch(2, []int{0, 1}); len(fx.Reserve) != 0 || len(fx.Decided) != 0 {
		t.Fatalf("a batch during the rebuild: %+v, want it parked", fx)
	}
	if fx := s.Offer(1, Offer{Sync: 1}); !slices.Equal(fx.Reserve, []BatchSend{{Provider: 0, ID: 2}, {Provider: 1, ID: 2}}) {
		t.Errorf("the rebuild's last offer: %+v, want the parked batch begun", fx.Reserve)
	}
	s.BeginBatch(3, []int{0})
	s.Rebuild()
	s.BeginBatch(5, []int{1})
	if fx := s.Drain(); len(fx.Decided) != 1 || fx.Decided[0] != (BatchDecision{ID: 5, Outcome: BatchDraining}) {
		t.Errorf("the drain: %+v, want the parked batch refused", fx.Decided)
	}
	if fx := s.BeginBatch(6, []int{0}); len(fx.Decided) != 1 || fx.Decided[0].Outcome != BatchDraining {
		t.Errorf("a batch during the drain: %+v", fx.Decided)
	}

	f := newTestSupervisor(1, 4, false)
	f.Rebuild()
	f.BeginBatch(1, []int{0})
	if fx := f.Fail(); !slices.Equal(fx.Decided, []BatchDecision{{ID: 1, Outcome: BatchStopped}}) {
		t.Errorf("the gateway failing: %+v, want the parked batch stopped", fx.Decided)
	}

	c := newTestSupervisor(1, 2, true)
	c.Offer(0, waiting(0, 1, 1))
	if fx := c.DispatchNow(); len(fx.Grants) == 0 || fx.Grants[0].Credit == nil {
		t.Fatalf("no credit handed out: %+v", fx)
	}
	if fx := c.BeginBatch(1, []int{0, 0}); len(fx.Reserve) != 0 || len(fx.Recalls) != 1 {
		t.Errorf("a batch the credit may hold: %+v, want it parked and the credit asked back", fx)
	}
	if fx := c.Offer(0, Offer{Seq: 2, Seen: 1}); !slices.Equal(fx.Reserve, []BatchSend{{Provider: 0, ID: 1}}) {
		t.Errorf("the credit given back: %+v, want the parked batch begun", fx.Reserve)
	}

	r := newTestSupervisor(2, 4, false)
	r.Offer(0, Offer{})
	r.Offer(1, Offer{})
	r.Retire(1)
	if fx := r.BeginBatch(1, []int{0, 1, 1}); !slices.Equal(fx.Decided, []BatchDecision{{ID: 1, Outcome: BatchRetired, Member: 1}}) {
		t.Errorf("a batch with a retired provider: %+v, want refused naming member 1", fx.Decided)
	}
}

// TestSupervisorReconfigure: a reload's caps take effect at once, and a provider it adds is
// a new slot in the dispatcher; a slot out of order is a bug.
func TestSupervisorReconfigure(t *testing.T) {
	s := newTestSupervisor(1, 1, false)
	s.Offer(0, waiting(0, 1, 3))
	s.DispatchNow()
	if fx := s.Reconfigure(Limits{MaxRunning: 3, MaxAdmitted: 6}, 2); !fx.Dispatch || s.Limits().MaxRunning != 3 {
		t.Errorf("raised caps: %+v, limits %+v; want a dispatch", fx, s.Limits())
	}
	if fx := s.DispatchNow(); len(fx.Grants) != 1 || len(fx.Grants[0].Grants) != 2 {
		t.Errorf("under the raised cap: %+v, want provider 0 granted 2 more", fx.Grants)
	}
	s.Offer(1, waiting(0, 1, 1))
	if s.Running() != 3 {
		t.Errorf("running %d, want 3", s.Running())
	}
}
