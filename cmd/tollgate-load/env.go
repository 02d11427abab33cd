package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"text/template"
	"time"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/actors"
	"github.com/tollgate/tollgate/cmd/internal/app"
	"github.com/tollgate/tollgate/cmd/internal/config"
	"github.com/tollgate/tollgate/cmd/internal/fakellm"
	"github.com/tollgate/tollgate/cmd/internal/serve"
	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/openai"
)

// setup is a gateway configuration for a scenario: global caps and providers, each backed by
// its own fake backend.
type setup struct {
	name        string
	maxRunning  int
	maxAdmitted int
	providers   []provider
	// spare providers get their fake backends and adapters at start but are not in the
	// config: a reload adds them (the reload scenario).
	spare []provider
	// cluster is the cluster: section's YAML, "" for a gateway alone.
	cluster string
	// auth is the auth: section's YAML, "" for none; adminKey the key the harness presents
	// to /admin/state then.
	auth, adminKey string
}

type provider struct {
	name         string
	lanes        int
	queueLength  int
	queueTimeout time.Duration
	runTimeout   time.Duration // 0: 5m
	models       []model
	backend      fakellm.Options
	// kind is the provider's kind, an OpenAI-compatible one ("" is openai); keys its API
	// keys (none: the backend gets no key); extra more YAML lines of the provider's, as a
	// user would write them (resilience settings).
	kind  string
	keys  []string
	extra string
}

func (p provider) kindOrDefault() string {
	if p.kind == "" {
		return openai.KindOpenAI
	}
	return p.kind
}

type model struct {
	name  string
	lanes int // model_lanes
}

// ids returns every client-facing model id of the setup, provider by provider.
func (s setup) ids() []string {
	var ids []string
	for _, p := range s.providers {
		for _, m := range p.models {
			ids = append(ids, p.name+"/"+m.name)
		}
	}
	return ids
}

// env is where a scenario sends its load: an in-process gateway with instrumented fake
// backends, or a gateway at --target (then backends and the process are out of reach, and
// only what HTTP shows is checked).
type env struct {
	setup setup
	// hangUps: the scenario's clients hang up. A backend then notices a closed connection a
	// moment after the gateway closed it and gave the lane back, so its own count may briefly
	// exceed the lanes; only the gateway-side count (callMeter) is held to them strictly.
	hangUps bool
	// refusals: the scenario's backends refuse calls on purpose (a hidden concurrency
	// limit); their refusals are counted, not breaches.
	refusals bool
	base     string       // the gateway's URL
	client   *http.Client // the load clients' shared pool
	local    *local       // nil with --target
}

// local is the in-process machinery behind an env.
type local struct {
	app      *app.App
	server   *serve.Server
	backends []*backend // in setup.providers order
	upstream *http.Transport
	meter    *callMeter // backend calls as the gateway holds them
	global   *gauge     // backend concurrency across all providers, as the backends see it
	served   chan struct{}
	urls     []string              // each backend's, in backends order
	next     atomic.Pointer[setup] // what the next app.Reload reads (the reload scenario)
	stateDir string                // the gateways' store files, removed with the backends
}

// urlsOf returns the backend URL of each of s's providers, by name.
func (l *local) urlsOf(s setup) []string {
	var out []string
	for _, p := range s.providers {
		for i, b := range l.backends {
			if b.spec.name == p.name {
				out = append(out, l.urls[i])
			}
		}
	}
	return out
}

type backend struct {
	spec provider
	fake *fakellm.Server
	tap  *tap
	http *httptest.Server
}

// newClient returns a pooled HTTP/1.1 client for conns concurrent load clients.
func newClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		MaxIdleConns: conns, MaxIdleConnsPerHost: conns, IdleConnTimeout: 30 * time.Second,
		DisableCompression: true, ForceAttemptHTTP2: false,
	}}
}

// configTemplate renders a setup as the YAML a user would write, so the harness goes through
// the same parsing, defaults and validation as cmd/tollgate.
var configTemplate = template.Must(template.New("cfg").Parse(`
listen: 127.0.0.1:0
limits: {max_running: {{.S.MaxRunning}}, max_admitted: {{.S.MaxAdmitted}}}
providers:
{{- range $i, $p := .S.Providers}}
  - name: {{$p.Name}}
    kind: {{$p.Kind}}
    base_url: {{index $.URLs $i}}/v1
{{- if $p.Keys}}
    keys: [{{range $j, $k := $p.Keys}}{{if $j}}, {{end}}"{{$k}}"{{end}}]
{{- end}}
    lanes: {{$p.Lanes}}
    queue_length: {{$p.QueueLength}}
    queue_timeout: {{$p.QueueTimeout}}
    run_timeout: {{$p.RunTimeout}}
{{$p.Extra}}    models:
{{- range $p.Models}}
      - {id: {{.Name}}, model_lanes: {{.Lanes}}}
{{- end}}
{{- end}}
{{.Cluster}}
{{.Auth}}
`))

// startLocal starts the fake backends, the gateway on a loopback listener, and a client pool.
func startLocal(ctx context.Context, s setup, conns int) (*env, error) {
	l := &local{global: &gauge{}, upstream: openai.NewTransport(5*time.Second, 5*time.Minute), served: make(chan struct{})}
	l.upstream.Proxy = nil
	l.meter = &callMeter{next: l.upstream, provider: map[string]*gauge{}, models: map[string]*modelGauges{}}
	var urls []string
	for _, p := range append(slices.Clone(s.providers), s.spare...) {
		f := fakellm.New(p.backend)
		t := newTap(f, l.global)
		b := &backend{spec: p, fake: f, tap: t, http: httptest.NewServer(t)}
		l.backends = append(l.backends, b)
		urls = append(urls, b.http.URL)
		host := strings.TrimPrefix(b.http.URL, "http://")
		l.meter.provider[host], l.meter.models[host] = &gauge{}, newModelGauges()
	}
	cfg, err := parseSetup(s, urls[:len(s.providers)])
	if err != nil {
		l.closeBackends()
		return nil, err
	}
	backends, err := l.clients()
	if err != nil {
		l.closeBackends()
		return nil, err
	}
	l.urls = urls
	// A reload reads the setup the scenario put in next, as tollgate reads its file again.
	reread := func() (*config.Config, error) {
		next := l.next.Load()
		if next == nil {
			return nil, errors.New("no setup to reload")
		}
		return parseSetup(*next, l.urlsOf(*next))
	}
	if l.stateDir, err = os.MkdirTemp("", "tollgate-load-state-"); err != nil {
		l.closeBackends()
		return nil, err
	}
	if l.app, err = app.New(ctx, cfg, app.Options{Logger: zerolog.Nop(), Backends: backends, Reload: reread, StateDir: l.stateDir}); err != nil {
		l.closeBackends()
		return nil, fmt.Errorf("start gateway: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		l.closeBackends()
		return nil, fmt.Errorf("listen: %w", err)
	}
	l.server = l.app.Server()
	go func() { // exits when close shuts the server down
		defer close(l.served)
		_ = l.server.Serve(ln)
	}()
	return &env{setup: s, base: "http://" + ln.Addr().String(), client: newClient(conns), local: l}, nil
}

// clients are the gateway's adapters for the fake backends, through the call meter.
func (l *local) clients() (map[string]llm.Backend, error) {
	backends := map[string]llm.Backend{}
	for _, b := range l.backends {
		c, err := openai.New(b.spec.kindOrDefault(), openai.Config{Name: b.spec.name, BaseURL: b.http.URL + "/v1",
			Keys: b.spec.keys, HTTPClient: &http.Client{Transport: l.meter}})
		if err != nil {
			return nil, fmt.Errorf("backend %s: %w", b.spec.name, err)
		}
		backends[b.spec.name] = c
	}
	return backends, nil
}

func parseSetup(s setup, urls []string) (*config.Config, error) {
	type m struct {
		Name  string
		Lanes int
	}
	type p struct {
		Name, Kind   string
		Keys         []string
		Extra        string
		Lanes        int
		QueueLength  int
		QueueTimeout string
		RunTimeout   string
		Models       []m
	}
	data := struct {
		S struct {
			MaxRunning, MaxAdmitted int
			Providers               []p
		}
		URLs    []string
		Cluster string
		Auth    string
	}{URLs: urls, Cluster: s.cluster, Auth: s.auth}
	data.S.MaxRunning, data.S.MaxAdmitted = s.maxRunning, s.maxAdmitted
	for _, pv := range s.providers {
		rt := pv.runTimeout
		if rt == 0 {
			rt = 5 * time.Minute
		}
		q := p{Name: pv.name, Kind: pv.kindOrDefault(), Keys: pv.keys, Extra: pv.extra, Lanes: pv.lanes,
			QueueLength: pv.queueLength, QueueTimeout: pv.queueTimeout.String(), RunTimeout: rt.String()}
		for _, mv := range pv.models {
			q.Models = append(q.Models, m{mv.name, mv.lanes})
		}
		data.S.Providers = append(data.S.Providers, q)
	}
	var buf bytes.Buffer
	if err := configTemplate.Execute(&buf, data); err != nil {
		return nil, fmt.Errorf("render config: %w", err)
	}
	cfg, err := config.Parse("setup "+s.name, buf.Bytes(), func(string) (string, bool) { return "", false })
	if err != nil {
		return nil, fmt.Errorf("setup %s: %w", s.name, err)
	}
	return cfg, nil
}

// close stops everything startLocal started, gateway first so no call reaches a closed backend.
func (e *env) close() {
	e.client.CloseIdleConnections()
	l := e.local
	if l == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = l.server.Shutdown(ctx)
	<-l.served
	_ = l.app.Drain(ctx)
	l.upstream.CloseIdleConnections()
	l.closeBackends()
}

func (l *local) closeBackends() {
	for _, b := range l.backends {
		b.tap.release()
		b.http.Close()
	}
	if l.stateDir != "" {
		_ = os.RemoveAll(l.stateDir)
	}
}

// state reads GET /admin/state.
func (e *env) state(ctx context.Context) (actors.AdminState, error) {
	var st actors.AdminState
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.base+"/admin/state", nil)
	if err != nil {
		return st, err
	}
	if e.setup.adminKey != "" {
		req.Header.Set("Authorization", "Bearer "+e.setup.adminKey)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return st, fmt.Errorf("GET /admin/state: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("GET /admin/state: status %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, fmt.Errorf("decode /admin/state: %w", err)
	}
	return st, nil
}

// waitState polls /admin/state until cond holds or within passes; it returns the last state.
func (e *env) waitState(ctx context.Context, within time.Duration, cond func(actors.AdminState) bool) (actors.AdminState, error) {
	deadline := time.Now().Add(within)
	for {
		st, err := e.state(ctx)
		if err == nil && cond(st) {
			return st, nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = errors.New("condition not reached")
			}
			return st, err
		}
		select { // polling with a deadline
		case <-ctx.Done():
			return st, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// stateDoc is the /admin/state document (SPEC §7).
type stateDoc = actors.AdminState

func idle(st actors.AdminState) bool { return st.Running == 0 && st.Queued == 0 }

// checkIdle records a breach unless /admin/state shows 0 running and 0 queued within 2 s.
func (e *env) checkIdle(ctx context.Context, r *result) {
	start := time.Now()
	st, err := e.waitState(ctx, 2*time.Second, idle)
	if err != nil {
		r.breach("/admin/state not idle within 2s of the end: running %d, queued %d (%v)", st.Running, st.Queued, err)
		return
	}
	r.Figures["idle_after_ms"] = ms(time.Since(start))
}

// checkBackends compares the busiest moments with the lanes and caps: of each provider
// against its lanes, of each model against its model_lanes, of all providers together
// against max_running. It checks the gateway's own backend calls (callMeter) always, and
// what the backends saw unless the scenario's clients hang up (see env.hangUps). Backends
// must never have refused a call.
func (e *env) checkBackends(r *result) {
	l := e.local
	if l == nil {
		return
	}
	type view struct {
		name   string
		strict bool
		total  int64
		prov   func(b *backend) int64
		models func(b *backend) map[string]int
	}
	views := []view{
		{"gateway", true, l.meter.global.max.Load(),
			func(b *backend) int64 { return l.meter.provider[b.host()].max.Load() },
			func(b *backend) map[string]int { return l.meter.models[b.host()].maxima() }},
		{"backend", !e.hangUps, l.global.max.Load(),
			func(b *backend) int64 { return b.fake.Stats().MaxConcurrent },
			func(b *backend) map[string]int { return b.tap.models.maxima() }},
	}
	for _, v := range views {
		over := func(format string, args ...any) {
			if v.strict {
				r.breach(v.name+" side: "+format, args...)
			} else {
				r.Figures[v.name+"_overshoot_after_hangups"]++
			}
		}
		r.Figures[v.name+"_max_concurrent_total"] = float64(v.total)
		if v.total > int64(e.setup.maxRunning) {
			over("%d concurrent backend calls in all; max_running is %d", v.total, e.setup.maxRunning)
		}
		for _, b := range l.backends {
			n := v.prov(b)
			r.Figures[v.name+"_"+b.spec.name+"_max_concurrent"] = float64(n)
			if n > int64(b.spec.lanes) {
				over("%d concurrent calls to %s; its lanes are %d", n, b.spec.name, b.spec.lanes)
			}
			perModel := v.models(b)
			for _, m := range b.spec.models {
				if perModel[m.name] > m.lanes {
					over("%d concurrent calls to %s/%s; its model_lanes are %d", perModel[m.name], b.spec.name, m.name, m.lanes)
				}
			}
		}
	}
	for _, b := range l.backends {
		switch st := b.fake.Stats(); {
		case st.Rejected > 0 && e.refusals:
			r.Figures["backend_"+b.spec.name+"_refused"] = float64(st.Rejected)
		case st.Rejected > 0:
			r.breach("backend %s refused %d calls for concurrency", b.spec.name, st.Rejected)
		}
	}
}

func (b *backend) host() string { return strings.TrimPrefix(b.http.URL, "http://") }

// baseline is the goroutine count before the load; settle checks it comes back.
//
// Idle connections are closed first, as checkGoroutines closes them: connections left from
// start-up (the gateway lists each backend's models) would otherwise count in the baseline and
// be gone at the end, hiding as many leaked goroutines. Their goroutines end asynchronously, so
// it polls until the count holds still (bounded).
func (e *env) baseline() int {
	if e.local != nil {
		e.client.CloseIdleConnections()
		e.local.upstream.CloseIdleConnections()
	}
	runtime.GC()
	n, deadline := runtime.NumGoroutine(), time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // polling with a deadline
		m := runtime.NumGoroutine()
		if m == n {
			break
		}
		n = m
	}
	return n
}

// goroutineSlack allows for runtime and library goroutines that come and go on their own
// (protoactor's dead-letter throttle, timers of closing connections).
const goroutineSlack = 4

// settleWithin bounds the wait for goroutines to return to baseline (a var: tests shorten it).
var settleWithin = 5 * time.Second

// checkGoroutines closes idle connections on both sides and polls until the process is back
// to within goroutineSlack of base, or records a breach with the surplus stacks' summary.
func (e *env) checkGoroutines(r *result, base int) {
	l := e.local
	if l == nil {
		return
	}
	deadline := time.Now().Add(settleWithin)
	n := 0
	for {
		e.client.CloseIdleConnections()
		l.upstream.CloseIdleConnections()
		if n = runtime.NumGoroutine(); n <= base+goroutineSlack {
			r.Figures["goroutines_over_baseline"] = float64(n - base)
			return
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
	r.breach("goroutines did not return to baseline: %d now, %d before the load%s", n, base, topStacks())
}

// topStacks summarises the goroutines now running by their first frame in this module or
// the standard library's net/http, for a breach message.
func topStacks() string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	counts := map[string]int{}
	for _, g := range strings.Split(string(buf), "\n\n") {
		lines := strings.Split(g, "\n")
		if len(lines) > 1 {
			counts[strings.TrimSpace(lines[1])]++
		}
	}
	var b strings.Builder
	for f, n := range counts {
		if n > 1 {
			fmt.Fprintf(&b, "\n      %4d × %s", n, f)
		}
	}
	return b.String()
}

// providerState finds provider name in a state document; nil when it is not there.
func providerState(st actors.AdminState, name string) *actors.ProviderState {
	for i := range st.Providers {
		if st.Providers[i].Name == name {
			return &st.Providers[i]
		}
	}
	return nil
}
