package policy

import (
	"reflect"
	"testing"
	"time"

	"github.com/tollgate/tollgate/actors/policy/keys"
)

// TestReserve checks the provider's half of a batch alone: all members start or none, a
// refusal changes nothing, and what held the batch back is named.
func TestReserve(t *testing.T) {
	spec := ProviderSpec{Name: "p", Lanes: 3, QueueLength: 4, QueueTimeout: 10 * time.Second,
		Models: []ModelSpec{{Name: "a", Lanes: 2}, {Name: "b", Lanes: 3}}}
	rated := spec
	rated.RPM, rated.Burst = 60, 2
	keyed := spec // each case gets a ring of its own (NewProvider keeps the spec's)
	keyed.Keys = []KeyPool{{}}
	tpm := spec
	tpm.TPM = 600 // a bucket of 100 tokens
	costly := func(id ID, costs ...int) []Member {
		var ms []Member
		for i, c := range costs {
			ms = append(ms, Member{ID: id + ID(i), Model: 1, Class: N, Tokens: c})
		}
		return ms
	}
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
		{name: "a lane in use", spec: spec, before: func(p *Provider) { p.Resume(Member{ID: 1, Model: 1, Class: N}, t0, 0) },
			members: members(10, 0, 1, 1), want: BlockedByLanes},
		{name: "learned lanes below the configured", spec: spec, before: func(p *Provider) { p.Lanes().SetEffective(2) },
			members: members(10, 0, 1, 1), want: BlockedByLanes},
		{name: "a model's lanes", spec: spec, members: members(10, 0, 0, 0), want: BlockedByModelLanes},
		{name: "a model lane in use", spec: spec, before: func(p *Provider) { p.Resume(Member{ID: 1, Model: 0, Class: N}, t0, 0) },
			members: members(10, 0, 0), want: BlockedByModelLanes},
		{name: "tokens for all", spec: rated, members: members(10, 0, 1), ok: true},
		{name: "fewer tokens than members", spec: rated, members: members(10, 0, 1, 1), want: BlockedByRateLimit},
		{name: "a waiting request that could start comes first", spec: spec,
			before: func(p *Provider) { p.Enter(1, Arrival{Model: 1, Class: B}, t0) }, members: members(10, 0), want: BlockedByQueue},
		{name: "a waiting request held by its model lanes does not block", spec: spec,
			before: func(p *Provider) {
				p.Resume(Member{ID: 1, Model: 0, Class: N}, t0, 0)
				p.Resume(Member{ID: 2, Model: 0, Class: N}, t0, 0)
				p.Enter(3, Arrival{Model: 0, Class: N}, t0)
			},
			members: members(10, 1), ok: true},
		{name: "an id already known", spec: spec, before: func(p *Provider) { p.Resume(Member{ID: 10, Model: 1, Class: N}, t0, 0) },
			members: members(10, 0), want: BlockedElsewhere},
		{name: "an unknown model", spec: spec, members: members(10, 0, 2), want: BlockedElsewhere},
		{name: "the breaker's probe lets one start", spec: spec, before: func(p *Provider) { p.Lanes().SetStartCap(1) },
			members: members(10, 0, 1), want: BlockedByStartCap},
		{name: "a model's learned lanes", spec: spec, before: func(p *Provider) { p.Lanes().SetEffectiveModel(1, 1) },
			members: members(10, 1, 1), want: BlockedByModelLanes},
		{name: "every key cooling", spec: keyed, before: func(p *Provider) {
			_, ring := p.Limiters().Keys(0)
			ring.RateLimited(0, time.Second, t0)
			ring.RateLimited(1, time.Second, t0)
		}, members: members(10, 0), want: BlockedByKeys},
		{name: "one key ready of two", spec: keyed, before: func(p *Provider) {
			_, ring := p.Limiters().Keys(0)
			ring.RateLimited(0, time.Second, t0)
		}, members: members(10, 0), ok: true},
		{name: "tokens per minute for one member, not two", spec: tpm, members: costly(10, 80, 80), want: BlockedByRateLimit},
		{name: "tokens per minute for both", spec: tpm, members: costly(10, 40, 40), ok: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.spec.Keys) > 0 {
				tc.spec.Keys = []KeyPool{{Ring: keys.New(2, keys.Config{Cooldown: time.Second})}}
			}
			p := NewProvider(tc.spec)
			if tc.before != nil {
				tc.before(p)
			}
			was, wasOffer := p.Snapshot(), p.Offer(t0)
			r, b, ok := p.Reserve(tc.members, time.Second, t0)
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
			if len(r.Members) != len(tc.members) || len(r.Keys) != len(tc.members) {
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
	before := p.limits.rate
	r, _, ok := p.Reserve(batch, time.Second, t0)
	if !ok {
		t.Fatal("reserve refused")
	}
	p.Release(&r, t0)
	if p.Lanes().Running() != 0 || p.limits.rate != before {
		t.Fatalf("released batch left running %d, limiter %+v (was %+v)", p.Lanes().Running(), p.limits.rate, before)
	}
	if got := p.limits.rate.Levels(t0).RPM; got != 3 {
		t.Fatalf("tokens after release %d, want the whole burst 3", got)
	}
	// Releasing again changes nothing, even once the limiter is back where the reservation
	// left it.
	p.Resume(Member{ID: 7, Model: 0, Class: N}, t0, 0)
	p.limits.rate.Take(0, t0)
	p.limits.rate.Take(0, t0)
	after := p.limits.rate
	p.Release(&r, t0)
	if p.limits.rate != after || p.Lanes().Running() != 1 {
		t.Fatalf("a second release changed the provider: limiter %+v (was %+v), running %d", p.limits.rate, after, p.Lanes().Running())
	}

	// A token taken in between: the batch's stay spent.
	p = NewProvider(spec)
	r, _, _ = p.Reserve(batch, time.Second, t0)
	p.Resume(Member{ID: 3, Model: 0, Class: N}, t0.Add(time.Second), 0)
	p.limits.rate.Take(0, t0.Add(time.Second))
	spent := p.limits.rate
	p.Release(&r, t0.Add(time.Second))
	if p.limits.rate != spent || p.Lanes().Running() != 1 {
		t.Fatalf("release after another start: limiter %+v (was %+v), running %d", p.limits.rate, spent, p.Lanes().Running())
	}

	// Keys: the members take the ring's turns in order, and an aborted batch gives them back.
	keyed := spec
	keyed.RPM, keyed.Keys = 0, []KeyPool{{Ring: keys.New(3, keys.Config{})}}
	p = NewProvider(keyed)
	r, _, _ = p.Reserve(batch, time.Second, t0)
	if !reflect.DeepEqual(r.Keys, []int{0, 1}) {
		t.Fatalf("keys %v, want [0 1]", r.Keys)
	}
	p.Release(&r, t0)
	if _, ring := p.Limiters().Keys(0); ring.Turn() != 0 {
		t.Fatalf("the ring's turn after the release is %d, want 0", ring.Turn())
	}
}
