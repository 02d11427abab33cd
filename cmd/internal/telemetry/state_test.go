package telemetry

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/actors"
)

// TestClientRunning: tollgate_client_running is each key's running calls summed over the
// providers, read from the state at scrape time; a key with none running is not listed.
func TestClientRunning(t *testing.T) {
	st := actors.AdminState{Providers: []actors.ProviderState{
		{Name: "p", RunningByClient: map[string]int{"alice": 2, "bob": 1, "idle": 0}},
		{Name: "q", RunningByClient: map[string]int{"alice": 1}},
		{Name: "r"},
	}}
	reg := prometheus.NewRegistry()
	reg.MustRegister(newStateCollector(func() actors.AdminState { return st }))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "tollgate_client_running" {
			continue
		}
		for _, m := range f.GetMetric() {
			got[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
		}
	}
	if len(got) != 2 || got["alice"] != 3 || got["bob"] != 1 {
		t.Fatalf("tollgate_client_running: %v, want alice 3 and bob 1", got)
	}
}
