package policy

import "time"

// Reconfigure takes new settings while requests run and wait (a reload, SPEC §16), in
// place, so that nothing admitted is disturbed:
//
//   - lanes and model lanes take effect for the next start: running requests keep theirs,
//     so lowered lanes bind as running requests finish (the effective lanes are cut to the
//     new lanes; the owner sets learned ones again afterwards);
//   - queue_length binds new arrivals only: a lowered one evicts nobody, it refuses new
//     arrivals until enough of those queued have started or left; queue_timeout is the
//     deadline of the requests that enter from now on, queued ones keep theirs;
//   - a changed rate limit, or a key pool whose ring or key_rate_limit changed, starts empty
//     at now, as after a rebuild: what was sent under the old one is not known to the new
//     one, so it cannot be let through at once without risking the backend's limit;
//   - models keep their indexes: ps.Models lists every model the provider has, the old ones
//     first in their order, then new ones, which are added with free lanes and empty queues.
//     A model is never taken out: the owner stops routing to one a reload removed, and its
//     queued requests are served as before.
//
// Queued requests keep their place in their FIFOs and in the deadline order.
func (p *Provider) Reconfigure(ps ProviderSpec, now time.Time) {
	p.name = ps.Name
	p.queueLength = max(ps.QueueLength, 0)
	p.timeout = ps.QueueTimeout
	for _, pl := range p.limits.reconfigure(ps, now) {
		p.q.forgetKeys(p.limits.poolOf, pl)
	}
	p.lanes.reconfigure(ps.Lanes, ps.Models)
	for m, ms := range ps.Models {
		if m >= len(p.models) {
			p.AddModel(ms)
			continue
		}
		p.models[m] = ms.Name
		p.limits.reconfigureModel(m, ms)
	}
}
