package actors

import (
	"context"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tollgate/tollgate/actors/policy"
	"github.com/tollgate/tollgate/actors/policy/keys"
	"github.com/tollgate/tollgate/actors/policy/tokens"
	"github.com/tollgate/tollgate/actors/replicas"
)

// AdminState is the /admin/state document (SPEC §7).
type AdminState struct {
	Running     int             `json:"running"`
	Queued      int             `json:"queued"`
	MaxRunning  int             `json:"max_running"`
	MaxAdmitted int             `json:"max_admitted"`
	Providers   []ProviderState `json:"providers"`
	// Cluster is the replicas' shared state (SPEC §17); absent when the gateway is alone.
	Cluster *replicas.Health `json:"cluster,omitempty"`
}

// ProviderState is one provider's lanes and queue, and its health (SPEC §7, §10, §11).
type ProviderState struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// State is "ok"; "out_of_service" once its actors failed past their restart budget;
	// "unavailable" when it did not answer in time (it is rebuilding after a crash);
	// "retiring" once a reload removed it, while it finishes what it runs and has queued.
	State          string `json:"state"`
	Lanes          int    `json:"lanes"`
	EffectiveLanes int    `json:"effective_lanes"`
	// EffectiveLanesReason says why effective_lanes has its value ("configured",
	// "stated_limit", "rate_limited", "probe", "shared": learned by another replica), since
	// when.
	EffectiveLanesReason string     `json:"effective_lanes_reason,omitempty"`
	EffectiveLanesSince  *time.Time `json:"effective_lanes_since,omitempty"`
	Running              int        `json:"running"`
	Queued               int        `json:"queued"`
	// AwaitingVerdict are the queued requests whose verdict against max_admitted is still
	// on its way from the dispatcher: queued less these is what admission has kept.
	AwaitingVerdict int          `json:"awaiting_verdict"`
	QueueLength     int          `json:"queue_length"`
	Models          []ModelState `json:"models"`
	// Keys are the provider's API keys by index (never the key itself), with their state.
	Keys []keys.KeyState `json:"keys,omitempty"`
	// AffinityBindings counts the conversations bound to one of its keys and models and
	// still warm (session affinity, SPEC §19): across the replicas when Redis answers,
	// else this replica's.
	AffinityBindings int `json:"affinity_bindings"`
	// Breaker is the circuit breaker's position.
	Breaker *BreakerState `json:"breaker,omitempty"`
	// RateLimit is the rate_limit's buckets: tokens available now and their capacity.
	RateLimit *tokens.Levels `json:"rate_limit,omitempty"`
	// RunningCluster and RunningByReplica: what every replica runs on this provider, and
	// who runs it (SPEC §17); absent when the gateway is alone or Redis did not answer.
	RunningCluster   *int           `json:"running_cluster,omitempty"`
	RunningByReplica map[string]int `json:"running_by_replica,omitempty"`
	// RunningByClient and QueuedByClient: the provider's calls by client key (SPEC §18),
	// for the keys with some; absent when no call has a key.
	RunningByClient map[string]int `json:"running_by_client,omitempty"`
	QueuedByClient  map[string]int `json:"queued_by_client,omitempty"`
}

// BreakerState is a circuit breaker for /admin/state.
type BreakerState struct {
	State string `json:"state"` // closed, open, half_open
	// RetryAfterMs is, while open, the time until its probe may start.
	RetryAfterMs int64      `json:"retry_after_ms"`
	Since        *time.Time `json:"since,omitempty"` // when it last changed; absent if never
}

// ModelState is one model's lanes.
type ModelState struct {
	ID         string `json:"id"`
	ModelLanes int    `json:"model_lanes"`
	// EffectiveModelLanes is below model_lanes while the gateway has learned the model
	// takes fewer (a model with keys of its own learns its own).
	EffectiveModelLanes int    `json:"effective_model_lanes"`
	EffectiveReason     string `json:"effective_reason,omitempty"`
	Running             int    `json:"running"`
	Queued              int    `json:"queued"`
	// Keys are the model's own keys, when it has some.
	Keys []keys.KeyState `json:"keys,omitempty"`
	// RunningCluster: as ProviderState's.
	RunningCluster *int `json:"running_cluster,omitempty"`
}

// providerState renders provider pv's policy state for /admin/state.
func providerState(pv *Provider, pol *policy.Provider, failed bool) ProviderState {
	snap := pol.Snapshot()
	ps := ProviderState{Name: pv.Name, Kind: pv.Kind, State: "ok", Lanes: snap.Lanes, EffectiveLanes: snap.EffectiveLanes,
		Running: snap.Running, Queued: snap.Queued, AwaitingVerdict: snap.AwaitingVerdict, QueueLength: snap.QueueLength, Models: make([]ModelState, len(snap.Models))}
	if failed {
		ps.State, ps.EffectiveLanes = "out_of_service", 0
	}
	for j, m := range snap.Models {
		ps.Models[j] = ModelState{ID: pv.Name + "/" + m.Name, ModelLanes: m.ModelLanes, EffectiveModelLanes: m.EffectiveModelLanes,
			Running: m.Running, Queued: m.Queued}
	}
	ps.RunningByClient, ps.QueuedByClient = byClient(snap.Clients)
	return ps
}

// byClient splits the policy's counts by client into running and queued, for the named
// clients with some (the anonymous client is every call when no keys are configured).
func byClient(counts map[string]policy.ClientCounts) (running, queued map[string]int) {
	for name, n := range counts {
		if name == "" {
			continue
		}
		if running == nil {
			running, queued = map[string]int{}, map[string]int{}
		}
		running[name], queued[name] = n.Running, n.Queued
	}
	return running, queued
}

// state is the provider's part of /admin/state: its policy's counts and its health.
func (a *providerActor) state() ProviderState {
	ps := providerState(&a.pv, a.pol, a.failed)
	if a.retiring {
		ps.State = "retiring"
	}
	h := a.health
	if h == nil {
		return ps
	}
	now := a.g.now()
	lanes := h.LanesSnapshot(-1, now)
	ps.EffectiveLanesReason, ps.EffectiveLanesSince = string(lanes.Reason), &lanes.Since
	if h.Keyed(0) {
		ps.Keys = a.vitals.keyStates(h.Ring(0), now)
	}
	for _, m := range h.OwnKeys() {
		if m < len(ps.Models) {
			ps.Models[m].Keys = a.vitals.keyStates(h.Ring(h.Pool(m)), now)
			ps.Models[m].EffectiveReason = string(h.LanesSnapshot(m, now).Reason)
		}
	}
	b := &BreakerState{State: h.BreakerState(now).String(), RetryAfterMs: h.RetryAfter(now).Milliseconds()}
	if s := h.BreakerSince(); !s.IsZero() {
		b.Since = &s
	}
	ps.Breaker = b
	if lim := a.pol.Limiters().Rate(); lim.Limited() {
		lv := a.pol.Limiters().Levels(now)
		ps.RateLimit = &lv
	}
	return ps
}

// stateTimeout bounds State's wait for the provider actors, which answer at once unless one
// is rebuilding after a crash or the actors are gone.
const stateTimeout = 2 * time.Second

// State returns a snapshot of lanes and queues: each provider's part taken by its own actor
// between two of its messages, the totals summed from them. It never blocks for long: after
// Shutdown it returns at once, and a provider that does not answer within stateTimeout is
// shown as "unavailable".
func (g *Gateway) State() AdminState {
	t, lim := g.table.Load(), g.caps.Load().limits
	st := AdminState{MaxRunning: lim.MaxRunning, MaxAdmitted: lim.MaxAdmitted, Providers: []ProviderState{}}
	// The providers served, and those a reload removed that still finish their calls.
	at := map[int]int{} // slot → index in st.Providers
	var pids []*actor.PID
	for p, pv := range t.provs {
		pid := pv.slot.pid.Load()
		if pid == nil || pv.slot.retired.Load() {
			continue
		}
		at[p] = len(st.Providers)
		pids = append(pids, pid)
		st.Providers = append(st.Providers, ProviderState{Name: pv.Name, Kind: pv.Kind, State: "unavailable", Lanes: pv.Lanes,
			QueueLength: pv.QueueLength, Models: []ModelState{}})
	}
	select {
	case <-g.stopped:
		return st
	default:
	}
	reply := make(chan statePart, len(pids))
	for _, pid := range pids {
		send(g.system.Root, pid, &stateQuery{reply: reply})
	}
	closed := closedSince(t, at)
	collectParts(&st, at, closed, reply, len(pids)-len(closed), g.stopped)
	st.Providers = withoutClosed(st.Providers, at, closed)
	return g.withCluster(withBindings(st.total(), g.sessions.counts(g.now())))
}

// closedSince is the providers among at (keyed by slot) that began to stop after the caller
// (State, RevokeClient) read the table: a retired provider stops with its mailbox, so it
// may never answer the query sent to it. One not closing once the query is sent answers it,
// since it closes only after handling the messages before its retireCheck (retireIdle).
func closedSince(t *modelTable, at map[int]int) map[int]bool {
	closed := map[int]bool{}
	for p := range at {
		if t.provs[p].slot.retired.Load() {
			closed[p] = true
		}
	}
	return closed
}

// withoutClosed is the listing ps (slot → index at) without the providers closed.
func withoutClosed(ps []ProviderState, at map[int]int, closed map[int]bool) []ProviderState {
	drop := make(map[int]bool, len(closed))
	for p := range closed {
		drop[at[p]] = true
	}
	out := ps[:0]
	for i, p := range ps {
		if !drop[i] {
			out = append(out, p)
		}
	}
	return out
}

// collectParts puts in st the parts of the want providers not closed that answer on reply
// within stateTimeout, or until stopped; the others stay "unavailable".
func collectParts(st *AdminState, at map[int]int, closed map[int]bool, reply <-chan statePart, want int, stopped <-chan struct{}) {
	timeout := time.NewTimer(stateTimeout)
	defer timeout.Stop()
	for want > 0 {
		select {
		case part := <-reply:
			if i, ok := at[part.p]; ok && !closed[part.p] {
				st.Providers[i] = part.provider
				want--
			}
		case <-timeout.C:
			return
		case <-stopped:
			return
		}
	}
}

// withCluster adds the replicas' shared state to st: its health, and the cluster-wide
// running counts and session bindings when Redis answers within stateTimeout (else st
// keeps this replica's bindings).
func (g *Gateway) withCluster(st AdminState) AdminState {
	sh := g.opts.Shared
	if sh == nil {
		return st
	}
	h := sh.Health()
	st.Cluster = &h
	scopes := []string{replicas.GatewayScope}
	for _, p := range st.Providers {
		scopes = append(scopes, replicas.ProviderScope(p.Name))
		for _, m := range p.Models {
			scopes = append(scopes, replicas.ModelScope(p.Name, strings.TrimPrefix(m.ID, p.Name+"/")))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
	defer cancel()
	occ, err := sh.Occupancy(ctx, scopes)
	if err != nil {
		return st
	}
	sum := func(scope string) (*int, map[string]int) {
		n := 0
		for _, k := range occ[scope] {
			n += k
		}
		return &n, occ[scope]
	}
	h.RunningCluster, h.RunningByReplica = sum(replicas.GatewayScope)
	for i := range st.Providers {
		p := &st.Providers[i]
		p.RunningCluster, p.RunningByReplica = sum(replicas.ProviderScope(p.Name))
		for j := range p.Models {
			m := &p.Models[j]
			m.RunningCluster, _ = sum(replicas.ModelScope(p.Name, strings.TrimPrefix(m.ID, p.Name+"/")))
		}
	}
	names := make([]string, len(st.Providers))
	for i, p := range st.Providers {
		names[i] = p.Name
	}
	if bound, err := sh.Bindings(ctx, names, g.sessions.rule); err == nil {
		st = withBindings(st, bound)
	}
	return st
}

func (st AdminState) total() AdminState {
	st.Running, st.Queued = 0, 0
	for _, p := range st.Providers {
		st.Running += p.Running
		st.Queued += p.Queued
	}
	return st
}
