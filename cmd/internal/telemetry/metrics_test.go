package telemetry

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/actors"
	"github.com/tollgate/tollgate/httpapi"
	"github.com/tollgate/tollgate/providers/llm"
)

func newTestMetrics() *Metrics {
	return NewMetrics(Series{Providers: []string{"p"}}, func() actors.AdminState { return actors.AdminState{} })
}

var outcomes = []httpapi.Outcome{
	{Route: "/v1/chat/completions", Model: "p/m", Provider: "p", Status: 200, Attempts: 1, QueueWait: time.Millisecond,
		TTFB: 20 * time.Millisecond, Duration: time.Second, Usage: llm.Usage{PromptTokens: 10, CompletionTokens: 20}},
	{Route: "/v1/chat/completions", Model: "p/m", Provider: "p", Status: 429, Code: "provider_queue_full", Duration: time.Millisecond},
	{Route: "/v1/chat/completions", Model: "p/m", Provider: "p", Status: 502, Code: "upstream_error", Attempts: 1, Duration: time.Second},
}

// TestObserveAllocatesNothing: once a label set has been seen, counting a request of it
// allocates nothing (a property, not a timing).
func TestObserveAllocatesNothing(t *testing.T) {
	m := newTestMetrics()
	for _, o := range outcomes {
		m.Observe(o)
		if n := testing.AllocsPerRun(100, func() { m.Observe(o) }); n != 0 {
			t.Errorf("%d %s: %v allocations per request", o.Status, o.Code, n)
		}
	}
}

func BenchmarkObserve(b *testing.B) {
	m := newTestMetrics()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for i := 0; pb.Next(); i++ {
			m.Observe(outcomes[i%len(outcomes)])
		}
	})
}
