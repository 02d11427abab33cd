// Package telemetry is what the gateway tells its operators beyond logs: the Prometheus
// series of SPEC §15 (Metrics) and OpenTelemetry traces exported over OTLP/HTTP (Tracing,
// and the wrapper that gives every backend attempt its span).
package telemetry

import (
	"net/http"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tollgate/tollgate/actors"
	"github.com/tollgate/tollgate/httpapi"
	"github.com/tollgate/tollgate/providers/llm"
)

// Histogram buckets, in seconds, fitted to LLM traffic: a queue wait from 1 ms (started at
// once) to the longest queue_timeout worth waiting (120 s); the first byte from a fast
// cache hit to a slow reasoning model (60 s); a whole call up to a long agent run (10 min).
var (
	queueBuckets    = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 20, 30, 60, 90, 120}
	ttfbBuckets     = []float64{.05, .1, .25, .5, .75, 1, 1.5, 2, 3, 5, 7.5, 10, 15, 20, 30, 45, 60}
	durationBuckets = []float64{.1, .25, .5, 1, 2.5, 5, 10, 20, 30, 60, 90, 120, 180, 240, 300, 450, 600}
)

// Metrics holds the gateway's series. Per-request series are counted from each answered
// request's httpapi.Outcome (Observe); the running, queued and lane gauges are read from the
// gateway's state at scrape time (stateCollector); retries, fallbacks and the breaker come
// from the actor layer through actors.Observer. Every label value is a configured provider
// or model id, a status, a SPEC §4 code or a fixed word: never a key, a request id or a prompt.
type Metrics struct {
	reg            *prometheus.Registry
	requests       *prometheus.CounterVec // provider, model, status, code
	queueWait      *prometheus.HistogramVec
	ttfb           *prometheus.HistogramVec
	duration       *prometheus.HistogramVec
	tokens         *prometheus.CounterVec // provider, model, direction
	rejections     *prometheus.CounterVec // provider, code
	upstreamErrors *prometheus.CounterVec // provider, class
	retries        *prometheus.CounterVec // provider
	fallbacks      *prometheus.CounterVec // from, to
	lanesLearned   *prometheus.CounterVec // provider, reason
	keysSetAside   *prometheus.CounterVec // provider, scope
	keysRestored   *prometheus.CounterVec // provider, scope, by
	state          *stateCollector
	clients        *clientSeries

	// Series resolved once per label set, so counting a request is map lookups and atomic
	// adds: no label hashing, no allocation.
	mu         sync.RWMutex
	byModel    map[modelKey]*modelSeries
	byAnswer   map[answerKey]prometheus.Counter
	byRejected map[modelKey]prometheus.Counter // provider, code
	byFailed   map[modelKey]prometheus.Counter // provider, class
}

type modelKey struct{ provider, model string }

type answerKey struct {
	provider, model string
	status          int
	code            string
}

type modelSeries struct {
	queueWait, ttfb, duration prometheus.Observer
	tokensIn, tokensOut       prometheus.Counter
	tokensCached              prometheus.Counter // the input tokens the backend served from its prompt cache
}

var _ actors.Observer = (*Metrics)(nil)

// Series is what NewMetrics needs to know of the configuration: the providers and the
// fallback pairs (model id → model id) whose counters exist, at 0, from the start.
type Series struct {
	Providers []string
	Fallbacks [][2]string
}

// NewMetrics registers every series of SPEC §15 and the Go runtime's and process's. state is
// read at every scrape for the running, queued and lane gauges.
func NewMetrics(s Series, state func() actors.AdminState) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), byModel: map[modelKey]*modelSeries{}, byAnswer: map[answerKey]prometheus.Counter{},
		byRejected: map[modelKey]prometheus.Counter{}, byFailed: map[modelKey]prometheus.Counter{}}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	histogram := func(name, help string, buckets []float64) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, []string{"provider", "model"})
	}
	m.requests = counter("tollgate_requests_total", "Answered model requests by the model that served or refused them, HTTP status and SPEC §4 code (499: the client left first).", "provider", "model", "status", "code")
	m.queueWait = histogram("tollgate_queue_wait_seconds", "Time requests waited for admission, started or turned away.", queueBuckets)
	m.ttfb = histogram("tollgate_time_to_first_byte_seconds", "Time from a request's arrival to the first byte of its answer.", ttfbBuckets)
	m.duration = histogram("tollgate_request_duration_seconds", "Time from a request's arrival to the end of its answer.", durationBuckets)
	m.tokens = counter("tollgate_tokens_total", "Tokens the backends reported, by direction (input, output, and cached_input: the part of input served from the backend's prompt cache).", "provider", "model", "direction")
	m.rejections = counter("tollgate_rejections_total", "Requests the gateway turned away before any backend call, by SPEC §4 code.", "provider", "code")
	m.upstreamErrors = counter("tollgate_upstream_errors_total", "Backend calls that failed, by class: rate_limited, quota, invalid_request, auth, unavailable, timeout, error.", "provider", "class")
	m.retries = counter("tollgate_retries_total", "Extra backend attempts made for calls (SPEC §10).", "provider")
	m.fallbacks = counter("tollgate_fallbacks_total", "Calls that left a model for one of its fallbacks.", "from", "to")
	m.lanesLearned = counter("tollgate_effective_lanes_changes_total", "Changes of a provider's effective lanes, by reason (SPEC §11).", "provider", "reason")
	m.keysSetAside = counter("tollgate_keys_set_aside_total", "Keys the backend refused and the gateway set aside until a probe (SPEC §10), by scope: key (every model) or model (the key for one model).", "provider", "scope")
	m.keysRestored = counter("tollgate_keys_restored_total", "Set-aside keys or (key, model) pairs back in use, by scope and by what restored them: probe or reload.", "provider", "scope", "by")
	m.state = newStateCollector(state)
	m.clients = newClientSeries()
	m.reg.MustRegister(m.clients.collectors()...)
	m.reg.MustRegister(m.requests, m.queueWait, m.ttfb, m.duration, m.tokens, m.rejections, m.upstreamErrors,
		m.retries, m.fallbacks, m.lanesLearned, m.keysSetAside, m.keysRestored, m.state,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.Declare(s)
	return m
}

// Declare makes the series of s's providers and fallback pairs exist at zero, so that a
// scrape shows them before anything happened (New declares its own; a reload, the new).
func (m *Metrics) Declare(s Series) {
	for _, p := range s.Providers {
		m.retries.WithLabelValues(p)
		for _, scope := range []string{"key", "model"} {
			m.keysSetAside.WithLabelValues(p, scope)
			for _, by := range []string{"probe", "reload"} {
				m.keysRestored.WithLabelValues(p, scope, by)
			}
		}
		for _, c := range upstreamClasses {
			m.upstreamErrors.WithLabelValues(p, c)
		}
		for _, k := range []llm.Kind{llm.KindQueueFull, llm.KindQueueTimeout, llm.KindOverloaded} {
			m.rejections.WithLabelValues(p, k.String())
		}
	}
	for _, f := range s.Fallbacks {
		m.fallbacks.WithLabelValues(f[0], f[1])
	}
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Register adds c's series (the cluster engine's, for one) to /metrics.
func (m *Metrics) Register(c prometheus.Collector) { m.reg.MustRegister(c) }

// Observe counts one answered model request (httpapi.Options.Observe).
func (m *Metrics) Observe(o httpapi.Outcome) {
	m.answer(o).Inc()
	m.clients.observe(o)
	switch {
	case o.Code == "":
	case o.Attempts == 0 && rejectionCodes[o.Code]: // a batch's refusal names no one model
		m.pair(m.byRejected, m.rejections, o.Provider, o.Code).Inc()
	case o.Attempts > 0 && upstreamClass[o.Code] != "":
		m.pair(m.byFailed, m.upstreamErrors, o.Provider, upstreamClass[o.Code]).Inc()
	}
	if o.Model == "" {
		return // refused before a model was chosen: counted, nothing to time per model
	}
	s := m.model(o.Provider, o.Model)
	s.queueWait.Observe(o.QueueWait.Seconds())
	if o.TTFB > 0 {
		s.ttfb.Observe(o.TTFB.Seconds())
	}
	s.duration.Observe(o.Duration.Seconds())
	if o.Usage.PromptTokens > 0 {
		s.tokensIn.Add(float64(o.Usage.PromptTokens))
	}
	if o.Usage.CompletionTokens > 0 {
		s.tokensOut.Add(float64(o.Usage.CompletionTokens))
	}
	if o.Usage.CachedTokens > 0 {
		s.tokensCached.Add(float64(o.Usage.CachedTokens))
	}
}

// pair returns vec's counter of the label pair (a, b), resolving it once into cache.
func (m *Metrics) pair(cache map[modelKey]prometheus.Counter, vec *prometheus.CounterVec, a, b string) prometheus.Counter {
	k := modelKey{a, b}
	m.mu.RLock()
	c, ok := cache[k]
	m.mu.RUnlock()
	if ok {
		return c
	}
	c = vec.WithLabelValues(a, b)
	m.mu.Lock()
	cache[k] = c
	m.mu.Unlock()
	return c
}

// answer returns the requests_total counter of o's label set, resolving it once.
func (m *Metrics) answer(o httpapi.Outcome) prometheus.Counter {
	k := answerKey{o.Provider, o.Model, o.Status, o.Code}
	m.mu.RLock()
	c, ok := m.byAnswer[k]
	m.mu.RUnlock()
	if ok {
		return c
	}
	c = m.requests.WithLabelValues(o.Provider, o.Model, strconv.Itoa(o.Status), o.Code)
	m.mu.Lock()
	m.byAnswer[k] = c
	m.mu.Unlock()
	return c
}

// model returns the per-model series of provider's model, resolving them once.
func (m *Metrics) model(provider, model string) *modelSeries {
	k := modelKey{provider, model}
	m.mu.RLock()
	s, ok := m.byModel[k]
	m.mu.RUnlock()
	if ok {
		return s
	}
	s = &modelSeries{
		queueWait: m.queueWait.WithLabelValues(provider, model),
		ttfb:      m.ttfb.WithLabelValues(provider, model),
		duration:  m.duration.WithLabelValues(provider, model),
		tokensIn:  m.tokens.WithLabelValues(provider, model, "input"),
		tokensOut: m.tokens.WithLabelValues(provider, model, "output"),
		// A part of input, counted again: cached_input ≤ input.
		tokensCached: m.tokens.WithLabelValues(provider, model, "cached_input"),
	}
	m.mu.Lock()
	m.byModel[k] = s
	m.mu.Unlock()
	return s
}

// rejectionCodes are the gateway's own refusals: admission, draining, batches, an open
// circuit (provider_unavailable with no backend attempt).
var rejectionCodes = map[string]bool{
	llm.KindQueueFull.String(): true, llm.KindQueueTimeout.String(): true, llm.KindOverloaded.String(): true,
	llm.KindDraining.String(): true, llm.KindBatchCapacity.String(): true, llm.KindBatchImpossible.String(): true,
	llm.KindProviderUnavailable.String(): true,
}

// upstreamClass names the class of a failed backend call by its SPEC §4 code.
var upstreamClass = map[string]string{
	llm.KindUpstreamRateLimited.String(): "rate_limited",
	llm.KindUpstreamQuota.String():       "quota",
	llm.KindUpstreamInvalid.String():     "invalid_request",
	llm.KindUpstreamAuth.String():        "auth",
	llm.KindProviderUnavailable.String(): "unavailable",
	llm.KindRunTimeout.String():          "timeout",
	llm.KindUpstream.String():            "error",
	llm.KindUpstreamTruncated.String():   "truncated",
}

var upstreamClasses = []string{"rate_limited", "quota", "invalid_request", "auth", "unavailable", "timeout", "truncated", "error"}

// Retried implements actors.Observer.
func (m *Metrics) Retried(provider string) { m.retries.WithLabelValues(provider).Inc() }

// FellBack implements actors.Observer.
func (m *Metrics) FellBack(from, to string) { m.fallbacks.WithLabelValues(from, to).Inc() }

// BreakerChanged implements actors.Observer.
func (m *Metrics) BreakerChanged(provider string, open bool) { m.state.setBreaker(provider, open) }

// KeySetAside implements actors.Observer.
func (m *Metrics) KeySetAside(provider, scope string) {
	m.keysSetAside.WithLabelValues(provider, scope).Inc()
}

// KeyRestored implements actors.Observer.
func (m *Metrics) KeyRestored(provider, scope, by string) {
	m.keysRestored.WithLabelValues(provider, scope, by).Inc()
}

// LanesLearned implements actors.Observer; the lanes themselves are read from the state.
func (m *Metrics) LanesLearned(provider string, _ int, reason string) {
	m.lanesLearned.WithLabelValues(provider, reason).Inc()
}
