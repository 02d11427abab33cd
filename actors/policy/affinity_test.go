package policy

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/actors/policy/keys"
	"github.com/tollgate/tollgate/actors/policy/tokens"
)

// TestBoundKey: a request whose conversation is bound to a key starts on it when it is
// ready and has room; a cooling key, one set aside or one whose key_rate_limit is spent is
// skipped for the ring's turn, and the request still starts (a preference, never a wait).
func TestBoundKey(t *testing.T) {
	tests := []struct {
		name  string
		bound int // Arrival.Bound
		setup func(r *keys.Ring)
		limit tokens.Limit
		want  int
	}{
		{"no binding: the ring's turn", 0, nil, tokens.Limit{}, 0},
		{"bound to key 2", 3, nil, tokens.Limit{}, 2},
		{"bound to a cooling key", 3, func(r *keys.Ring) { r.RateLimited(2, time.Minute, t0) }, tokens.Limit{}, 0},
		{"bound to a set-aside key", 2, func(r *keys.Ring) { r.Refused(1, 0, keys.WholeKey, "bad key", false, t0) }, tokens.Limit{}, 0},
		{"bound to a key out of range", 9, nil, tokens.Limit{}, 0},
		{"bound to a key whose own rate limit is spent", 2, nil, tokens.Limit{RPM: 1, Burst: 1}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ring := keys.New(3, keys.Config{})
			if tt.setup != nil {
				tt.setup(ring)
			}
			spec := prov("p", 4, 4, 4)
			spec.Keys = []KeyPool{{Ring: ring, Limit: tt.limit}}
			p := NewProvider(spec)
			if tt.limit.RPM > 0 { // spend key 1's one request of this minute
				p.limits.pools[0].lims[1].Take(0, t0)
			}
			if o, _ := p.Enter(1, Arrival{Model: 0, Bound: tt.bound}, t0); o != Queued {
				t.Fatalf("enter: %v", o)
			}
			st, _, ok := p.Grant(Grant{Epoch: p.Epoch(), Class: 0}, t0)
			if !ok || st.Key != tt.want {
				t.Fatalf("started %v on key %d, want key %d", ok, st.Key, tt.want)
			}
			if ring.Turn() != (tt.want+1)%3 {
				t.Errorf("turn %d after a start on key %d, want past it", ring.Turn(), tt.want)
			}
		})
	}
}
