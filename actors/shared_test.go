package actors

import (
	"reflect"
	"testing"

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
	scopes := func(lanes, model int) []LeaseScope {
		return []LeaseScope{{GatewayScope, 8}, {ProviderScope("p"), lanes}, {ModelScope("p", "m"), model}}
	}
	buckets := []LeaseBucket{{Name: RateScope("p"), PerMinute: 60, Burst: 5, Cost: 1}, {Name: TokenScope("p"), PerMinute: 6000, Cost: 120}}
	for _, tc := range []struct {
		name  string
		lanes [2]int
		want  []LeaseScope
	}{
		{"configured", [2]int{}, scopes(4, 3)},
		{"learned lower", [2]int{2, 1}, scopes(2, 1)},
		{"never above the configured", [2]int{9, 9}, scopes(4, 3)},
	} {
		c := &call{route: r, tokens: 120, lanes: tc.lanes, prio: llm.Interactive}
		got := g.claim(c)
		if !reflect.DeepEqual(got.Scopes, tc.want) || !reflect.DeepEqual(got.Buckets, buckets) {
			t.Errorf("%s: claim %+v, want scopes %+v and buckets %+v", tc.name, got, tc.want, buckets)
		}
	}
}
