package actors

import (
	"fmt"
	"testing"

	"github.com/tollgate/tollgate/actors/policy/affinity"
)

// TestPreferBound: the bound model goes first when it is one of the chain's fallbacks, the
// others keeping their order; a binding to the first or to a model not in the chain leaves
// it as it is.
func TestPreferBound(t *testing.T) {
	tests := []struct{ bound, want string }{
		{"p/c", "[p/c p/a p/b p/d]"},
		{"p/b", "[p/b p/a p/c p/d]"},
		{"p/a", "[p/a p/b p/c p/d]"},
		{"q/x", "[p/a p/b p/c p/d]"},
	}
	for _, tt := range tests {
		chain := []route{{id: "p/a"}, {id: "p/b"}, {id: "p/c"}, {id: "p/d"}}
		preferBound(chain, affinity.Binding{Model: tt.bound})
		var ids []string
		for _, r := range chain {
			ids = append(ids, r.id)
		}
		if got := fmt.Sprint(ids); got != tt.want {
			t.Errorf("bound to %s: %s, want %s", tt.bound, got, tt.want)
		}
	}
}

func TestBoundKeyOfRoute(t *testing.T) {
	b := affinity.Binding{Provider: "p", Key: 2, Model: "p/a"}
	for _, tt := range []struct {
		bound bool
		prov  string
		want  int
	}{{true, "p", 3}, {true, "q", 0}, {false, "p", 0}} {
		if got := boundKey(b, tt.bound, &route{provider: tt.prov}); got != tt.want {
			t.Errorf("boundKey(bound %v, provider %s) = %d, want %d", tt.bound, tt.prov, got, tt.want)
		}
	}
}
