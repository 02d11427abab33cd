package main

import (
	"bytes"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// gauge counts something in progress and remembers its high-water mark.
type gauge struct{ now, max atomic.Int64 }

func (g *gauge) enter() {
	n := g.now.Add(1)
	for {
		m := g.max.Load()
		if n <= m || g.max.CompareAndSwap(m, n) {
			return
		}
	}
}

func (g *gauge) leave() { g.now.Add(-1) }

// modelGauges count calls in progress per backend model.
type modelGauges struct {
	mu     sync.Mutex
	perNow map[string]int
	perMax map[string]int
}

func newModelGauges() *modelGauges {
	return &modelGauges{perNow: map[string]int{}, perMax: map[string]int{}}
}

// enter counts a call to model in and returns how many are in progress with it.
func (m *modelGauges) enter(model string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.perNow[model]++
	m.perMax[model] = max(m.perMax[model], m.perNow[model])
	return m.perNow[model]
}

func (m *modelGauges) leave(model string) {
	m.mu.Lock()
	m.perNow[model]--
	m.mu.Unlock()
}

// maxima returns the highest concurrency seen per model.
func (m *modelGauges) maxima() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]int, len(m.perMax))
	for k, v := range m.perMax {
		out[k] = v
	}
	return out
}

// callMeter wraps the gateway's upstream transport and counts backend calls as the gateway
// holds them: from the request being sent until the response body is closed (or the round
// trip failed). That is SPEC §2's "the HTTP call has returned", after which the gateway may
// give the lane back. Unlike the backend's own count it does not include the moment a
// backend takes to notice that a cancelled call's connection was closed.
type callMeter struct {
	next     http.RoundTripper
	global   gauge
	provider map[string]*gauge       // by backend host:port
	models   map[string]*modelGauges // by backend host:port

	mu    sync.Mutex
	spans []span // every metered call, when the scenario keeps them (keepSpans)
	keep  bool
}

// span is one backend call as the gateway held it.
type span struct {
	host       string
	start, end time.Time
}

// keepSpans makes the meter keep every call's span from now on.
func (m *callMeter) keepSpans() {
	m.mu.Lock()
	m.keep = true
	m.mu.Unlock()
}

// calls returns the spans kept so far (a call still in flight has a zero end).
func (m *callMeter) calls() []span {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]span(nil), m.spans...)
}

func (m *callMeter) RoundTrip(req *http.Request) (*http.Response, error) {
	var model string
	if req.Body != nil && req.Method == http.MethodPost {
		body, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		model, _ = peek(body)
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	p, pm := m.provider[req.URL.Host], m.models[req.URL.Host]
	if p == nil || model == "" {
		return m.next.RoundTrip(req) // model listing, or a host we do not meter
	}
	m.global.enter()
	p.enter()
	pm.enter(model)
	idx := -1
	m.mu.Lock()
	if m.keep {
		idx = len(m.spans)
		m.spans = append(m.spans, span{host: req.URL.Host, start: time.Now()})
	}
	m.mu.Unlock()
	done := func() {
		pm.leave(model)
		p.leave()
		m.global.leave()
		if idx >= 0 {
			m.mu.Lock()
			m.spans[idx].end = time.Now()
			m.mu.Unlock()
		}
	}
	resp, err := m.next.RoundTrip(req)
	if err != nil {
		done()
		return nil, err
	}
	resp.Body = &meteredBody{ReadCloser: resp.Body, done: done}
	return resp, nil
}

type meteredBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *meteredBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.done)
	return err
}
