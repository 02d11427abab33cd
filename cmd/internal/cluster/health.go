package cluster

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/actors/replicas"
)

// Status is the engine's state, for /metrics; Health is the part /admin/state shows.
type Status struct {
	Replica string
	Phase   Phase
	// Redis is true while Redis answers (Shared, Rejoining): /admin/state's "redis": "ok".
	Redis bool
	// ReplicasAlive counts the replicas whose heartbeat was seen within lease_ttl at the
	// last heartbeat, this one included; while Redis is away, the count the shares use.
	ReplicasAlive int
	Since         time.Time // when Phase began
	LastError     string    // the last Redis failure; it never holds the password
	Outages       uint64    // times Redis was lost
	LostLeases    uint64    // entries found expired at renewal and counted again
	Beats         uint64    // heartbeats answered
	LastBeat      time.Time // when a heartbeat last answered (and refreshed the view); zero before the first
	// OutageExcess counts the calls beyond this replica's shares, started too lately for
	// the other replicas' views to show them, that it held when it lost Redis: the only
	// calls that can take a scope beyond its limit during an outage.
	OutageExcess uint64
	// DuplicateName: another process heartbeats with this replica's name.
	DuplicateName bool
}

// Status returns the engine's state now.
func (e *Engine) Status() Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	h := e.status
	h.Phase = e.phaseLocked(e.now())
	return h
}

// Health is the engine's state now as /admin/state's "cluster" object shows it (the
// running counts are the gateway's to add, from Occupancy).
func (e *Engine) Health() replicas.Health {
	st := e.Status()
	h := replicas.Health{Replica: st.Replica, ReplicasAlive: st.ReplicasAlive, Redis: "down", Phase: st.Phase.String()}
	if st.Redis {
		h.Redis = "ok"
	}
	if !st.LastBeat.IsZero() {
		h.LastHeartbeat = &st.LastBeat
	}
	return h
}

// Collector is the engine's Prometheus series, for the gateway's /metrics registry.
func (e *Engine) Collector() prometheus.Collector { return collector{e} }

type collector struct{ e *Engine }

var (
	descRedisUp  = prometheus.NewDesc("tollgate_cluster_redis_up", "1 while Redis answers this replica (shared leases), 0 while it runs on the outage rule.", nil, nil)
	descPhase    = prometheus.NewDesc("tollgate_cluster_phase", "1 for the phase this replica is in: shared, holding, settling, fallback, rejoining.", []string{"phase"}, nil)
	descAlive    = prometheus.NewDesc("tollgate_cluster_replicas_alive", "Replicas whose heartbeat was seen within lease_ttl, this one included.", nil, nil)
	descOutages  = prometheus.NewDesc("tollgate_cluster_outages_total", "Times this replica lost Redis and fell back to its shares.", nil, nil)
	descLost     = prometheus.NewDesc("tollgate_cluster_lost_leases_total", "Lease entries found expired at renewal (renewed too late) and counted again.", nil, nil)
	descExcess   = prometheus.NewDesc("tollgate_cluster_outage_excess", "Calls beyond this replica's shares that it held when it lost Redis, started too lately for the other replicas' views to show them: at most this many can run over a cap during the outage.", nil, nil)
	descDupeName = prometheus.NewDesc("tollgate_cluster_duplicate_replica", "1 when another process heartbeats with this replica's name.", nil, nil)
)

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRedisUp, descPhase, descAlive, descOutages, descLost, descExcess, descDupeName} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	h := c.e.Status()
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	ch <- prometheus.MustNewConstMetric(descRedisUp, prometheus.GaugeValue, b(h.Redis))
	for _, p := range []Phase{Shared, Holding, Settling, Alone, Rejoining} {
		ch <- prometheus.MustNewConstMetric(descPhase, prometheus.GaugeValue, b(h.Phase == p), p.String())
	}
	ch <- prometheus.MustNewConstMetric(descAlive, prometheus.GaugeValue, float64(h.ReplicasAlive))
	ch <- prometheus.MustNewConstMetric(descOutages, prometheus.CounterValue, float64(h.Outages))
	ch <- prometheus.MustNewConstMetric(descLost, prometheus.CounterValue, float64(h.LostLeases))
	ch <- prometheus.MustNewConstMetric(descExcess, prometheus.CounterValue, float64(h.OutageExcess))
	ch <- prometheus.MustNewConstMetric(descDupeName, prometheus.GaugeValue, b(h.DuplicateName))
}
