package actors

import (
	"sync"
	"time"

	"github.com/tollgate/tollgate/providers/llm"

	"github.com/tollgate/tollgate/actors/policy/affinity"
)

// sessions is the gateway's session affinity (SPEC §19): the pure table, guarded for the
// callers' goroutines that consult it in Start. A conversation's binding only orders what
// Start tries first (its model) and which key its provider picks first; admission, fairness
// and the keys' health decide as for any call.
type sessions struct {
	mu sync.Mutex
	t  *affinity.Table
}

func newSessions(cfg affinity.Config) *sessions { return &sessions{t: affinity.New(cfg)} }

// lookup is conversation conv's binding at now; ok is false without one (or without conv).
func (s *sessions) lookup(conv string, now time.Time) (affinity.Binding, bool) {
	if conv == "" {
		return affinity.Binding{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.t.Lookup(conv, now)
}

// bind records that conv's call succeeded at now, served as b, and says what that did.
func (s *sessions) bind(conv string, b affinity.Binding, now time.Time) affinity.Outcome {
	if conv == "" {
		return affinity.None
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.t.Bind(conv, b, now)
}

// counts is the live bindings per provider, for /admin/state.
func (s *sessions) counts(now time.Time) map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.t.Counts(now)
}

// preferBound moves the model conv is bound to to the front of chain when it is one of its
// candidates (a fallback that served the last turn); a binding to another model leaves the
// chain as it is. A route's pick is consulted in chain (see pickBound).
func preferBound(chain []route, b affinity.Binding) {
	for i := 1; i < len(chain); i++ {
		if chain[i].id == b.Model {
			bound := chain[i]
			copy(chain[1:i+1], chain[:i])
			chain[0] = bound
			return
		}
	}
}

// resolveBound is resolve, except that a route (SPEC §12) whose candidates include the model
// the conversation is bound to picks that model.
func (t *modelTable) resolveBound(name string, req *llm.Request, b affinity.Binding, bound bool) (route, bool) {
	if rr, ok := t.picks[name]; ok && bound {
		for _, c := range rr.Models() {
			if r, ok := t.lookup(c); ok && r.id == b.Model {
				return r, true
			}
		}
	}
	return t.resolve(name, req)
}

// boundKey is Arrival.Bound for a call on r: 1 + the bound key when the binding is at r's
// provider, else 0.
func boundKey(b affinity.Binding, bound bool, r *route) int {
	if !bound || b.Provider != r.provider {
		return 0
	}
	return b.Key + 1
}

// withBindings fills in every provider's count of live bindings, n.
func withBindings(st AdminState, n map[string]int) AdminState {
	for i := range st.Providers {
		st.Providers[i].AffinityBindings = n[st.Providers[i].Name]
	}
	return st
}
