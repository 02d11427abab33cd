package actors

import (
	"reflect"
	"testing"

	"github.com/tollgate/tollgate/actors/policy"
	"github.com/tollgate/tollgate/actors/policy/capacity"
	"github.com/tollgate/tollgate/actors/policy/health"
	"github.com/tollgate/tollgate/actors/replicas"
	"github.com/tollgate/tollgate/providers/llm"
)

// TestClaim: a call claims max_running, its provider's and its model's lanes, at the lanes
// its replica learned when those are lower (never above the configured ones), and its
// provider's rpm and its estimated tokens of tpm.
func TestClaim(t *testing.T) {
	p := testProvider("p", newHeld(), "m")
	p.Lanes, p.Models[0].Lanes = 4, 3
	p.RateLimit = RateLimit{RPM: 60, TPM: 6000, Burst: 5}
	g := newTestGateway(t, 8, 16, p)
	r, _ := g.table.Load().lookup("p/m")
	scopes := func(lanes, model int) []replicas.Scope {
		return []replicas.Scope{{Name: replicas.GatewayScope, Limit: 8}, {Name: replicas.ProviderScope("p"), Limit: lanes}, {Name: replicas.ModelScope("p", "m"), Limit: model}}
	}
	buckets := []replicas.Bucket{{Name: replicas.RateScope("p"), PerMinute: 60, Burst: 5, Cost: 1}, {Name: replicas.TokenScope("p"), PerMinute: 6000, Cost: 120}}
	for _, tc := range []struct {
		name  string
		lanes [2]int
		want  []replicas.Scope
	}{
		{"configured", [2]int{}, scopes(4, 3)},
		{"learned lower", [2]int{2, 1}, scopes(2, 1)},
		{"never above the configured", [2]int{9, 9}, scopes(4, 3)},
	} {
		c := &call{route: r, tokens: 120, prio: llm.Interactive}
		got := g.claim(c, tc.lanes, "")
		if !reflect.DeepEqual(got.Scopes, tc.want) || !reflect.DeepEqual(got.Buckets, buckets) {
			t.Errorf("%s: claim %+v, want scopes %+v and buckets %+v", tc.name, got, tc.want, buckets)
		}
	}
}

// TestLanesSharedRead: learned lanes another replica announces are taken, lower or higher;
// a value read from the shared state (at start, at a rejoin) only when lower than this
// replica's own, so a stale read never loosens a cap.
func TestLanesSharedRead(t *testing.T) {
	p := testProvider("p", newHeld(), "m")
	p.Lanes = 4
	g := newTestGateway(t, 8, 16, p)
	a := newProviderActor(g, g.slots.at(0), p, p.Models)
	now := g.now()
	a.health = health.New(healthSpec(p, p.Models), now)
	a.pol = policy.NewProvider(a.spec())
	for i, tc := range []struct {
		lanes int
		read  bool
		want  int
	}{
		{2, true, 2},  // a read, lower: taken
		{3, true, 2},  // a read, higher: not taken
		{3, false, 3}, // a notice, higher: taken
		{9, false, 4}, // clamped to the configured lanes
		{1, false, 1}, // a notice, lower
	} {
		a.peers.lanesShared(&lanesShared{scope: replicas.ProviderScope("p"), lanes: tc.lanes, from: "r2", lower: tc.read}, now)
		if got := a.pol.Lanes().Effective(); got != tc.want || a.health.ProviderLanes() != tc.want {
			t.Fatalf("step %d (%d lanes, read %v): effective %d (health %d), want %d", i, tc.lanes, tc.read, got, a.health.ProviderLanes(), tc.want)
		}
	}
	if r := a.health.LanesSnapshot(-1, now).Reason; r != capacity.Shared {
		t.Errorf("reason %q, want shared", r)
	}
}

// TestClaimKeyBuckets: a call on a key whose key_rate_limit the replicas share claims the
// key's rpm and, with tokens, its tpm, beside the provider's.
func TestClaimKeyBuckets(t *testing.T) {
	p := testProvider("p", newHeld(), "m")
	p.RateLimit = RateLimit{RPM: 60}
	p.KeyRateLimit = RateLimit{RPM: 30, TPM: 3000, Burst: 2}
	g := newTestGateway(t, 8, 16, p)
	r, _ := g.table.Load().lookup("p/m")
	key := replicas.KeyScope("p", 0, 1)
	c := &call{route: r, tokens: 120, prio: llm.Interactive}
	want := []replicas.Bucket{{Name: replicas.RateScope("p"), PerMinute: 60, Cost: 1},
		{Name: "rpm/key/p/0/1", PerMinute: 30, Burst: 2, Cost: 1}, {Name: "tpm/key/p/0/1", PerMinute: 3000, Cost: 120}}
	if got := g.claim(c, [2]int{}, key).Buckets; !reflect.DeepEqual(got, want) {
		t.Errorf("buckets %+v, want %+v", got, want)
	}
	// No key name: no shared key_rate_limit (no shared state, or no real keys).
	if got := g.claim(c, [2]int{}, "").Buckets; !reflect.DeepEqual(got, want[:1]) {
		t.Errorf("without a key name: buckets %+v, want %+v", got, want[:1])
	}
}
