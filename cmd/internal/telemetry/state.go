package telemetry

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/actors"
)

// stateCollector reads the gauges of SPEC §15 from the gateway's state at scrape time, so
// they are exactly what /admin/state says and the actor layer keeps no second count.
type stateCollector struct {
	state                               func() actors.AdminState
	running, queued                     *prometheus.Desc // provider, model
	lanes, effective, breaker           *prometheus.Desc // provider
	outOfService                        *prometheus.Desc // provider
	maxRunning, maxAdmitted, allRunning *prometheus.Desc
	allQueued                           *prometheus.Desc
	clientRunning                       *prometheus.Desc // client

	mu          sync.Mutex
	breakerOpen map[string]bool // set through actors.Observer
}

func newStateCollector(state func() actors.AdminState) *stateCollector {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &stateCollector{
		state:     state,
		running:   desc("tollgate_running", "Requests running, per model.", "provider", "model"),
		queued:    desc("tollgate_queued", "Requests waiting in the queue, per model.", "provider", "model"),
		lanes:     desc("tollgate_lanes", "Configured lanes of the provider.", "provider"),
		effective: desc("tollgate_effective_lanes", "Lanes the provider is used with now: below tollgate_lanes while the gateway has learned that the backend takes fewer.", "provider"),
		breaker:   desc("tollgate_breaker_open", "1 while the provider's circuit breaker is open.", "provider"),
		outOfService: desc("tollgate_provider_out_of_service",
			"1 once the provider was taken out of service: its actors failed past their restart budget.", "provider"),
		maxRunning:  desc("tollgate_max_running", "The gateway's max_running."),
		maxAdmitted: desc("tollgate_max_admitted", "The gateway's max_admitted."),
		allRunning:  desc("tollgate_gateway_running", "Requests running across all providers."),
		allQueued:   desc("tollgate_gateway_queued", "Requests queued across all providers."),
		clientRunning: desc("tollgate_client_running",
			"Requests of a client key running across all providers (SPEC §18); keys with none are not listed.", "client"),
		breakerOpen: map[string]bool{},
	}
}

func (c *stateCollector) setBreaker(provider string, open bool) {
	c.mu.Lock()
	c.breakerOpen[provider] = open
	c.mu.Unlock()
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.running, c.queued, c.lanes, c.effective, c.breaker, c.outOfService,
		c.maxRunning, c.maxAdmitted, c.allRunning, c.allQueued, c.clientRunning} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.state()
	gauge := func(d *prometheus.Desc, v int, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	gauge(c.maxRunning, st.MaxRunning)
	gauge(c.maxAdmitted, st.MaxAdmitted)
	gauge(c.allRunning, st.Running)
	gauge(c.allQueued, st.Queued)
	for client, n := range runningByClient(st) {
		gauge(c.clientRunning, n, client)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range st.Providers {
		gauge(c.lanes, p.Lanes, p.Name)
		gauge(c.effective, p.EffectiveLanes, p.Name)
		open := 0
		if c.breakerOpen[p.Name] {
			open = 1
		}
		gauge(c.breaker, open, p.Name)
		down := 0
		if p.State == "out_of_service" {
			down = 1
		}
		gauge(c.outOfService, down, p.Name)
		for _, m := range p.Models {
			gauge(c.running, m.Running, p.Name, m.ID)
			gauge(c.queued, m.Queued, p.Name, m.ID)
		}
	}
}

// runningByClient sums each client key's running calls over the providers.
func runningByClient(st actors.AdminState) map[string]int {
	out := map[string]int{}
	for _, p := range st.Providers {
		for client, n := range p.RunningByClient {
			if n > 0 {
				out[client] += n
			}
		}
	}
	return out
}
