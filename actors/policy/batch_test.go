package policy

import (
	"reflect"
	"testing"
	"time"
)

// TestReserve checks the provider's half of a batch alone: all members start or none, a
// refusal changes nothing, and what held the batch back is named.
func TestReserve(t *testing.T) {
	spec := ProviderSpec{Name: "p", Lanes: 3, QueueLength: 4, QueueTimeout: 10 * time.Second,
		Models: []ModelSpec{{Name: "a", Lanes: 2}, {Name: "b", Lanes: 3}}}
	rated := spec
	rated.RPM, rated.Burst = 60, 2
	members := func(id ID, models ...int) []Member {
		var ms []Member
		for i, m := range models {
			ms = append(ms, Member{ID: id + ID(i), Model: m, Class: N})
		}
		return ms
	}
	cases := []struct {
		name    string
		spec    ProviderSpec
		before  func(p *Provider)
		members []Member
		want    Blocker
		ok      bool
	}{
		{name: "fits", spec: spec, members: members(10, 0, 0, 1), ok: true},
		{name: "more members than free lanes", spec: spec, members: members(10, 0, 1, 1, 1), want: BlockedByLanes},
		{name: "a lane in use", spec: spec, before: func(p *Provider) { p.Resume(1, 1, N, t0) },
			members: members(10, 0, 1, 1), want: BlockedByLanes},
		{name: "learned lanes below the configured", spec: spec, before: func(p *Provider) { p.SetEffectiveLanes(2) },
			members: members(10, 0, 1, 1), want: BlockedByLanes},
		{name: "a model's lanes", spec: spec, members: members(10, 0, 0, 0), want: BlockedByModelLanes},
		{name: "a model lane in use", spec: spec, before: func(p *Provider) { p.Resume(1, 0, N, t0) },
			members: members(10, 0, 0), want: BlockedByModelLanes},
		{name: "tokens for all", spec: rated, members: members(10, 0, 1), ok: true},
		{name: "fewer tokens than members", spec: rated, members: members(10, 0, 1, 1), want: BlockedByRateLimit},
		{name: "a waiting request that could start comes first", spec: spec,
			before: func(p *Provider) { p.Arrive(1, 1, B, t0) }, members: members(10, 0), want: BlockedByQueue},
		{name: "a waiting request held by its model lanes does not block", spec: spec,
			before:  func(p *Provider) { p.Resume(1, 0, N, t0); p.Resume(2, 0, N, t0); p.Arrive(3, 0, N, t0) },
			members: members(10, 1), ok: true},
		{name: "an id already known", spec: spec, before: func(p *Provider) { p.Resume(10, 1, N, t0) },
			members: members(10, 0), want: BlockedElsewhere},
		{name: "an unknown model", spec: spec, members: members(10, 0, 2), want: BlockedElsewhere},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := NewProvider(tc.spec)
			if tc.before != nil {
				tc.before(p)
			}
			was, wasOffer := p.Snapshot(), p.Offer(t0)
			r, b, ok := p.Reserve(tc.members, t0)
			if ok != tc.ok || b != tc.want {
				t.Fatalf("Reserve = %v %v, want %v %v", b, ok, tc.want, tc.ok)
			}
			if !ok {
				if now := p.Snapshot(); !reflect.DeepEqual(now, was) {
					t.Fatalf("a refused batch changed the provider: %+v, was %+v", now, was)
				}
				if o := p.Offer(t0); o.Running != wasOffer.Running || o.Avail != wasOffer.Avail {
					t.Fatalf("a refused batch changed the offer: %+v, was %+v", o, wasOffer)
				}
				return
			}
			if got := p.Snapshot().Running; got != was.Running+len(tc.members) {
				t.Fatalf("running %d after reserving %d members, was %d", got, len(tc.members), was.Running)
			}
			for _, mb := range tc.members {
				if in, ok := p.Lookup(mb.ID); !ok || !in.Running || in.Model != mb.Model || !in.Started.Equal(t0) {
					t.Fatalf("member %d: %+v %v", mb.ID, in, ok)
				}
			}
			if len(r.Members) != len(tc.members) {
				t.Fatalf("reservation %+v", r)
			}
		})
	}
}

// TestRelease checks that an aborted batch leaves no trace when nothing happened in
// between, and never gives back a token another request may have used.
func TestRelease(t *testing.T) {
	spec := ProviderSpec{Name: "p", Lanes: 4, QueueLength: 4, QueueTimeout: 10 * time.Second, RPM: 60, Burst: 3,
		Models: []ModelSpec{{Name: "a", Lanes: 4}}}
	batch := []Member{{ID: 1, Model: 0, Class: N}, {ID: 2, Model: 0, Class: N}}

	p := NewProvider(spec)
	before := p.bucket
	r, _, ok := p.Reserve(batch, t0)
	if !ok {
		t.Fatal("reserve refused")
	}
	p.Release(&r, t0)
	if p.Running() != 0 || p.bucket != before {
		t.Fatalf("released batch left running %d, bucket %+v (was %+v)", p.Running(), p.bucket, before)
	}
	if got := p.bucket.tokens(t0, 3); got != 3 {
		t.Fatalf("tokens after release %d, want the whole burst 3", got)
	}
	// Releasing again changes nothing, even once the limiter is back where the reservation
	// left it.
	p.Resume(7, 0, N, t0)
	p.bucket.take(t0)
	p.bucket.take(t0)
	after := p.bucket
	p.Release(&r, t0)
	if p.bucket != after || p.Running() != 1 {
		t.Fatalf("a second release changed the provider: bucket %+v (was %+v), running %d", p.bucket, after, p.Running())
	}

	// A token taken in between: the batch's stay spent.
	p = NewProvider(spec)
	r, _, _ = p.Reserve(batch, t0)
	p.Resume(3, 0, N, t0.Add(time.Second))
	p.bucket.take(t0.Add(time.Second))
	spent := p.bucket
	p.Release(&r, t0.Add(time.Second))
	if p.bucket != spent || p.Running() != 1 {
		t.Fatalf("release after another start: bucket %+v (was %+v), running %d", p.bucket, spent, p.Running())
	}
}
