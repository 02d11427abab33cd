package actors

import (
	"reflect"
	"testing"

	"github.com/tollgate/tollgate/actors/replicas"
	"github.com/tollgate/tollgate/providers/llm"
)

// TestClaimClientScope: a call of a key with a max_running claims a slot of the key's
// scope, named by the key's name, with its cap as the limit; a key without a cap, the
// anonymous client claim none, and a batch member claims it uncapped (counted, never
// refused).
func TestClaimClientScope(t *testing.T) {
	p := testProvider("p", newHeld(), "m")
	g := newTestGateway(t, 8, 16, p)
	r, _ := g.table.Load().lookup("p/m")
	base := g.claim(&call{route: r, prio: llm.Interactive}, [2]int{}, "").Scopes
	for _, tc := range []struct {
		name   string
		client llm.Client
		batch  bool
		want   []replicas.Scope
	}{
		{"capped", llm.Client{Name: "alice", MaxRunning: 3}, false, []replicas.Scope{{Name: "client/alice", Limit: 3}}},
		{"no cap", llm.Client{Name: "bob", RPM: 5}, false, nil},
		{"anonymous", llm.Client{MaxRunning: 3}, false, nil},
		{"batch member", llm.Client{Name: "alice", MaxRunning: 3}, true, []replicas.Scope{{Name: "client/alice", Limit: replicas.Uncapped}}},
	} {
		got := g.claim(&call{route: r, prio: llm.Interactive, client: tc.client, batch: tc.batch}, [2]int{}, "").Scopes
		if want := append(append([]replicas.Scope{}, base...), tc.want...); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: scopes %+v, want %+v", tc.name, got, want)
		}
	}
}
