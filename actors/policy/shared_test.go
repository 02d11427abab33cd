package policy

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// TestUnstart: a request the replicas refused goes back to its place with its deadline,
// kept; its model offers nothing while blocked, and the provider's other model is offered
// meanwhile.
func TestUnstart(t *testing.T) {
	spec := ProviderSpec{Name: "p", Lanes: 2, QueueLength: 4, QueueTimeout: 10 * time.Second,
		Models: []ModelSpec{{Name: "a", Lanes: 1}, {Name: "b", Lanes: 1}}}
	p := NewProvider(spec)
	for id, m := range []int{0, 0, 0} {
		p.Enter(ID(id+1), Arrival{Model: m, Class: N}, t0.Add(time.Duration(id)*time.Millisecond))
	}
	p.Ack(Ack{Seq: p.Offer(t0).Seq})
	for id := ID(1); id <= 3; id++ {
		p.Verdict(Verdict{ID: id})
	}
	st, _, ok := p.Grant(Grant{Class: N}, t0)
	if id := st.ID; !ok || id != 1 {
		t.Fatalf("Grant = %d %v, want request 1", id, ok)
	}
	if p.Unstart(99, t0) || p.Unstart(2, t0) {
		t.Fatal("Unstart of an unknown or queued request changed something")
	}
	now := t0.Add(time.Millisecond)
	if !p.Unstart(1, now) {
		t.Fatal("Unstart of the started request failed")
	}
	if o := p.Offer(now); o.Running != 0 || o.Queued != 3 || o.Kept != 3 || o.Fresh != 0 || len(o.Pending) != 0 || o.Avail[N] != 1 {
		t.Errorf("offer after Unstart %+v", o)
	}
	in, _ := p.Lookup(1)
	if in.Running || !in.Deadline.Equal(t0.Add(10*time.Second)) {
		t.Errorf("request 1 after Unstart: %+v", in)
	}
	p.Lanes().Block(0)
	if o := p.Offer(now); o.Avail != [llm.NumPriorities]int{} {
		t.Errorf("a blocked model offers %v", o.Avail)
	}
	if b := p.Blocker(0, 0, now); b != BlockedByCluster {
		t.Errorf("Blocker = %v, want BlockedByCluster", b)
	}
	if _, _, ok := p.Grant(Grant{Class: N}, now); ok {
		t.Error("a grant started a request of a blocked model")
	}
	p.Enter(4, Arrival{Model: 1, Class: N}, now)
	if o := p.Offer(now); o.Avail[N] != 1 {
		t.Errorf("the other model offers %v while the first is blocked", o.Avail)
	}
	p.Lanes().Unblock(0)
	for _, want := range []ID{1, 4} { // model a's oldest again first, then model b
		if st, _, ok := p.Grant(Grant{Class: N}, now); !ok || st.ID != want {
			t.Errorf("Grant = %d %v, want %d", st.ID, ok, want)
		}
	}
	if buf := p.Expire(t0.Add(10*time.Second+time.Millisecond), nil); len(buf) != 1 || buf[0] != 2 {
		t.Errorf("Expire = %v, want request 2 (request 3 is due a millisecond later)", buf)
	}
}
