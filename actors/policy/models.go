package policy

import "slices"

// AddModel adds model ms to provider p while the gate runs and returns its index within the
// provider (what Arrive takes), or -1 for an unknown provider. The gate does not look at
// names: the caller keeps them unique.
//
// Nothing admitted is disturbed: existing models keep their indexes as Arrive, Lookup and
// Snapshot see them, queued and running requests keep their places, lanes and deadlines,
// and the new model starts with free lanes and empty queues. It changes no eligibility, so
// no Dispatch is needed afterwards.
//
// A provider's models stay contiguous in g.models, which keeps the dispatcher's hot loop a
// plain range over a slice. Inserting shifts the models of the providers after p by one, so
// their entries' global model indexes are shifted too: O(models + entries), which is fine
// for something that happens when a backend reports a new model, a few times a day.
func (g *Gate) AddModel(p int, ms ModelSpec) int {
	if p < 0 || p >= len(g.providers) {
		return -1
	}
	pr := &g.providers[p]
	at := pr.first + pr.n
	md := model{name: ms.Name, lanes: max(ms.Lanes, 0)}
	for c := range md.fifo {
		md.fifo[c] = newList()
	}
	// The FIFO lists live in the model structs and link entries by entry index, so moving
	// the structs along the slice leaves every list intact.
	g.models = slices.Insert(g.models, at, md)
	pr.n++
	for i := p + 1; i < len(g.providers); i++ {
		g.providers[i].first++
	}
	for e := range g.entries {
		if en := &g.entries[e]; en.state != free && int(en.m) >= at {
			en.m++
		}
	}
	return pr.n - 1
}
