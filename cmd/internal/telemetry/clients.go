package telemetry

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/httpapi"
)

// clientSeries are the per-client-key series of SPEC §18. The client label is a key's name
// (config or admin API), never its secret; calls of the anonymous client (auth off) are not
// counted here.
type clientSeries struct {
	requests  *prometheus.CounterVec // client, code
	tokens    *prometheus.CounterVec // client, kind
	spend     *prometheus.CounterVec // client
	queueWait *prometheus.HistogramVec
	dropped   prometheus.Counter
}

func newClientSeries() *clientSeries {
	return &clientSeries{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_client_requests_total",
			Help: "Answered model requests per client key and SPEC §4 code (\"\" on success)."}, []string{"client", "code"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_client_tokens_total",
			Help: "Tokens per client key: kind in, cached_in, out, reasoning."}, []string{"client", "kind"}),
		spend: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_client_spend_usd_total",
			Help: "Spend in USD per client key, from the models' prices."}, []string{"client"}),
		queueWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "tollgate_client_queue_wait_seconds",
			Help: "Queue wait per client key.", Buckets: queueBuckets}, []string{"client"}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "tollgate_ledger_dropped_total",
			Help: "Ledger entries dropped because the store's write buffer was full."}),
	}
}

func (c *clientSeries) collectors() []prometheus.Collector {
	return []prometheus.Collector{c.requests, c.tokens, c.spend, c.queueWait, c.dropped}
}

// observe counts one answered request of a client key.
func (c *clientSeries) observe(o httpapi.Outcome) {
	if o.Client == "" {
		return
	}
	c.requests.WithLabelValues(o.Client, o.Code).Inc()
	for kind, n := range map[string]int{"in": o.Usage.PromptTokens, "cached_in": o.Usage.CachedTokens,
		"out": o.Usage.CompletionTokens, "reasoning": o.Usage.ReasoningTokens} {
		if n > 0 {
			c.tokens.WithLabelValues(o.Client, kind).Add(float64(n))
		}
	}
	if o.CostUSD > 0 {
		c.spend.WithLabelValues(o.Client).Add(o.CostUSD)
	}
	c.queueWait.WithLabelValues(o.Client).Observe(o.QueueWait.Seconds())
}

// LedgerDropped counts ledger entries the store dropped.
func (m *Metrics) LedgerDropped(n int) { m.clients.dropped.Add(float64(n)) }
