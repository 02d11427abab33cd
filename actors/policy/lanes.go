package policy

// Lanes are one provider's lanes and its models' model lanes: how many each has, how many
// may be used now (effective: learned lower, SPEC §7, or cut by a reload), how many run, the
// start cap, and which models the replicas' shared state blocks (shared.go). A start takes
// a lane, a model lane and a start of the cap; a finish gives the lanes back. The owner
// sets what it decided from its own facts (SetEffective, SetEffectiveModel, SetStartCap,
// Block, Unblock); the Provider's admission counts the starts and reads the rest. Models
// are indexed as the Provider's.
type Lanes struct {
	lanes, eff int
	running    int
	startCap   int // starts still allowed; negative: no cap
	models     []modelLanes
}

// modelLanes are one model's model lanes.
type modelLanes struct {
	lanes   int
	eff     int // effective model lanes: lanes unless learned lower
	running int
	blocked bool // the replicas' shared state has no room for it now (Block)
}

// newLanes makes n lanes, all free and effective, with no start cap and no model yet.
func newLanes(n int) Lanes {
	return Lanes{lanes: max(n, 0), eff: max(n, 0), startCap: -1}
}

// Running is the number of requests running.
func (l *Lanes) Running() int { return l.running }

// Effective is the lanes calls may use now.
func (l *Lanes) Effective() int { return l.eff }

// SetEffective sets how many of the provider's lanes may be used (SPEC §7 effective_lanes),
// clamped to [0, lanes]. Lowering it stops nothing already running; new requests wait until
// running drops below it.
func (l *Lanes) SetEffective(n int) { l.eff = min(max(n, 0), l.lanes) }

// EffectiveModel is model m's model lanes as learned (SetEffectiveModel), 0 for an unknown
// model.
func (l *Lanes) EffectiveModel(m int) int {
	if m < 0 || m >= len(l.models) {
		return 0
	}
	return l.models[m].eff
}

// SetEffectiveModel sets model m's effective model lanes, clamped to [0, model_lanes], as
// SetEffective does for the provider (a model with keys of its own learns its own).
func (l *Lanes) SetEffectiveModel(m, n int) {
	if m >= 0 && m < len(l.models) {
		l.models[m].eff = min(max(n, 0), l.models[m].lanes)
	}
}

// SetStartCap allows at most n more starts (each start takes one), or any number when n is
// negative. The circuit breaker uses it: 0 while open, 1 for the half-open probe.
func (l *Lanes) SetStartCap(n int) { l.startCap = max(n, -1) }

// Block makes model m offer nothing until Unblock: the replicas' shared state has no room
// for it now. Its requests keep their places and deadlines. An unknown model is ignored.
func (l *Lanes) Block(m int) {
	if m >= 0 && m < len(l.models) {
		l.models[m].blocked = true
	}
}

// Unblock lets model m's requests be offered again.
func (l *Lanes) Unblock(m int) {
	if m >= 0 && m < len(l.models) {
		l.models[m].blocked = false
	}
}

// addModel adds a model's lanes, all free and effective.
func (l *Lanes) addModel(ms ModelSpec) {
	n := max(ms.Lanes, 0)
	l.models = append(l.models, modelLanes{lanes: n, eff: n})
}

// free is how many requests may start at once: the free effective lanes within the start
// cap (negative when running is above the effective lanes).
func (l *Lanes) free() int {
	free := l.eff - l.running
	if l.startCap >= 0 {
		free = min(free, l.startCap)
	}
	return free
}

// take counts a start of model m: a lane, a model lane and a start of the cap.
func (l *Lanes) take(m int) {
	l.resume(m)
	if l.startCap > 0 {
		l.startCap--
	}
}

// resume counts model m's request as running, as a rebuild restores it: it took its start of
// the cap before the crash.
func (l *Lanes) resume(m int) {
	l.running++
	l.models[m].running++
}

// stop gives back the lanes of a request of model m that stopped running.
func (l *Lanes) stop(m int) {
	l.running--
	l.models[m].running--
}

// blocker says what of the lanes holds back a request for model m, in the order admission
// consults them: the start cap, the replicas' block, the lanes, the model lanes.
// BlockedElsewhere: none of them (or m is unknown and the provider's lanes have room).
func (l *Lanes) blocker(m int) Blocker {
	known := m >= 0 && m < len(l.models)
	switch {
	case l.startCap == 0:
		return BlockedByStartCap
	case known && l.models[m].blocked:
		return BlockedByCluster
	case l.running >= l.eff:
		return BlockedByLanes
	case known && l.models[m].running >= l.models[m].eff:
		return BlockedByModelLanes
	}
	return BlockedElsewhere
}

// batchBlocker says what of the lanes holds back a batch of n members, need[m] of them of
// model m, when keptLanes lanes and keptModels model lanes are kept for another batch
// (batchhold.go); BlockedElsewhere: nothing does.
func (l *Lanes) batchBlocker(n int, need map[int]int, keptLanes int, keptModels []int) Blocker {
	switch {
	case l.startCap >= 0 && l.startCap < n:
		return BlockedByStartCap
	case l.eff-l.running-keptLanes < n:
		return BlockedByLanes
	}
	for m, k := range need {
		if md := &l.models[m]; md.eff-md.running-kept(keptModels, m) < k {
			return BlockedByModelLanes
		}
	}
	return BlockedElsewhere
}

// reconfigure takes a reload's lanes for the provider and for its models in ms (the old
// ones, by index; the caller adds new ones): the effective lanes are cut to the new lanes,
// and follow them when nothing was learned.
func (l *Lanes) reconfigure(lanes int, ms []ModelSpec) {
	learned := l.eff < l.lanes
	l.lanes = max(lanes, 0)
	if !learned {
		l.eff = l.lanes
	}
	l.eff = min(l.eff, l.lanes)
	for m := range min(len(ms), len(l.models)) {
		md := &l.models[m]
		learned := md.eff < md.lanes
		md.lanes = max(ms[m].Lanes, 0)
		if !learned {
			md.eff = md.lanes
		}
		md.eff = min(md.eff, md.lanes)
	}
}
