package actors

import (
	"context"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/actors/policy/affinity"
	"github.com/tollgate/tollgate/actors/replicas"
	"github.com/tollgate/tollgate/providers/llm"
)

// sessions is the gateway's session affinity (SPEC §19): the pure table, guarded for the
// callers' goroutines that consult it in Start. A conversation's binding only orders what
// Start tries first (its model) and which key its provider picks first; admission, fairness
// and the keys' health decide as for any call.
//
// With several replicas (Options.Shared) the table is this replica's cache of the bindings
// they share: a conversation it has no live binding for is looked up in the shared state,
// and every binding it makes is written there (affinityshare.go). Both are bounded, and a
// shared state that does not answer leaves the call unbound: affinity is a preference,
// never a wait.
type sessions struct {
	mu   sync.Mutex
	t    *affinity.Table
	sh   replicas.Shared // nil: this gateway is alone
	rule replicas.Affinity
	w    *writeThrough // nil without sh
	log  zerolog.Logger
}

func newSessions(cfg affinity.Config, sh replicas.Shared, log zerolog.Logger) *sessions {
	cfg = cfg.WithDefaults()
	s := &sessions{t: affinity.New(cfg), sh: sh, rule: replicas.Affinity{TTL: cfg.TTL, Max: cfg.Max}, log: log}
	if sh != nil {
		s.w = newWriteThrough(sh, s.rule, log)
	}
	return s
}

// recheck is how long a replica serves a conversation on its own live binding before it
// asks the replicas' shared state again whether another replica has moved it since.
const recheck = time.Second

// lookup is conversation conv's binding at now; ok is false without one (or without conv).
// A binding this replica does not hold, or has not checked against the replicas' shared
// state for recheck, is asked of that state, for at most one bounded round trip (and not
// at all while it is known to be away); a newer one found there replaces this replica's.
func (s *sessions) lookup(ctx context.Context, conv string, now time.Time) (affinity.Binding, bool) {
	if conv == "" {
		return affinity.Binding{}, false
	}
	s.mu.Lock()
	b, ok, due := s.t.LookupDue(conv, now, recheck)
	s.mu.Unlock()
	if s.sh == nil || ok && !due {
		return b, ok
	}
	return s.lookupShared(ctx, conv, now)
}

// lookupShared is conv's binding once the replicas' shared one is read: theirs when newer
// than this replica's (which it then replaces), else this replica's; this replica's alone
// when the shared state has none or does not answer.
func (s *sessions) lookupShared(ctx context.Context, conv string, now time.Time) (affinity.Binding, bool) {
	ctx, cancel := context.WithTimeout(ctx, sharedTimeout)
	defer cancel()
	sb, age, ok, err := s.sh.Bound(ctx, replicas.AffinityScope(conv), s.rule)
	if err != nil {
		s.log.Debug().Err(err).Msg("session affinity: the replicas' shared bindings did not answer; the call goes on this replica's binding, if any")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil || !ok {
		s.t.Checked(conv, now)
	} else {
		s.t.Adopt(conv, affinity.Binding{Provider: sb.Provider, Key: sb.Key, Model: sb.Model}, now.Add(-age), now)
	}
	return s.t.Lookup(conv, now)
}

// bind records that conv's call succeeded at now, served as b, and says what that did. With
// several replicas the binding is written to their shared state too, off the caller's
// goroutine.
func (s *sessions) bind(conv string, b affinity.Binding, now time.Time) affinity.Outcome {
	if conv == "" {
		return affinity.None
	}
	s.mu.Lock()
	out := s.t.Bind(conv, b, now)
	s.mu.Unlock()
	if s.w != nil {
		s.w.put(replicas.Binding{Name: replicas.AffinityScope(conv), Provider: b.Provider, Key: b.Key, Model: b.Model})
	}
	return out
}

// start runs the write-through to the shared state, if there is one, until stop.
func (s *sessions) start() {
	if s.w != nil {
		s.w.start()
	}
}

// stop ends the write-through and waits for it; what it had not written is dropped.
func (s *sessions) stop() {
	if s.w != nil {
		s.w.stop()
	}
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
