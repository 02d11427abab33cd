package cluster

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestCollectorSeries: /metrics shows the engine's Status, the outage excess among it.
func TestCollectorSeries(t *testing.T) {
	e := &Engine{o: Options{Now: time.Now}, status: Status{Redis: true, ReplicasAlive: 3, Outages: 2, LostLeases: 1, OutageExcess: 4}}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(e.Collector()); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) > 0 {
				continue
			}
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			got[mf.GetName()] = v
		}
	}
	for name, want := range map[string]float64{
		"tollgate_cluster_redis_up": 1, "tollgate_cluster_replicas_alive": 3, "tollgate_cluster_outages_total": 2,
		"tollgate_cluster_lost_leases_total": 1, "tollgate_cluster_outage_excess": 4, "tollgate_cluster_duplicate_replica": 0,
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
		}
	}
}

// TestHealthLastHeartbeat: /admin/state's cluster object dates the view the outage rule
// would start from, and a later heartbeat moves it on.
func TestHealthLastHeartbeat(t *testing.T) {
	s := startRedis(t)
	e, _ := newEngine(t, s, "a")
	first := e.Health().LastHeartbeat
	if first == nil {
		t.Fatal("no last_heartbeat after New's first heartbeat")
	}
	eventually(t, 5*time.Second, "a later heartbeat", func() bool {
		h := e.Health().LastHeartbeat
		return h != nil && h.After(*first)
	})
}
