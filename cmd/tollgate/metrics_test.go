package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

const (
	metricsAPIKey   = "sk-client-METRICSKEY-0001"
	metricsAdminKey = "sk-admin-METRICSKEY-0002"
)

const metricsConfig = `
auth: {api_keys: ["` + metricsAPIKey + `"], admin_keys: ["` + metricsAdminKey + `"]}
limits: {max_running: 2, max_admitted: 4}
providers:
  - {name: p, kind: fake, lanes: 1, queue_length: 1, queue_timeout: 1s, models: [{id: m}]}
  - {name: q, kind: fake, lanes: 1, models: [{id: m}]}
  - name: demo
    kind: fake
    retries: 1
    models:
      - {id: echo}
      - {id: down, fail: unavailable, fallbacks: [demo/echo]}
      - {id: broken, fail: unavailable}
`

// scrape reads /metrics with key and parses it with the Prometheus text parser.
func scrape(t *testing.T, url, key string) map[string]*dto.MetricFamily {
	t.Helper()
	req, _ := http.NewRequest("GET", url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := rawClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("/metrics: %d %s", res.StatusCode, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return fams
}

// sample finds the series of family name whose labels are exactly labels ("k=v" pairs).
func sample(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) *dto.Metric {
	t.Helper()
	fam, ok := fams[name]
	if !ok {
		t.Fatalf("no family %s", name)
	}
	want := strings.Join(labels, ",")
	for _, m := range fam.GetMetric() {
		var got []string
		for _, l := range m.GetLabel() {
			got = append(got, l.GetName()+"="+l.GetValue())
		}
		if strings.Join(got, ",") == want {
			return m
		}
	}
	t.Fatalf("%s has no series {%s}", name, want)
	return nil
}

func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	m := sample(t, fams, name, labels...)
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	t.Fatalf("%s{%v} is neither counter nor gauge", name, labels)
	return 0
}

func keyed(ctx context.Context, url, model string, stream bool, header ...string) answer {
	body := fmt.Sprintf(`{"model":%q,"stream":%v,"stream_options":%s,"messages":[{"role":"user","content":"hello there"}]}`,
		model, stream, map[bool]string{true: `{"include_usage":true}`, false: "null"}[stream])
	req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+metricsAPIKey)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := rawClient.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return answer{status: res.StatusCode, header: res.Header, body: string(b), err: err}
}

func keyedAsync(ctx context.Context, url, model string) chan answer {
	ch := make(chan answer, 1)
	go func() { ch <- keyed(ctx, url, model, false) }() // exits with the request
	return ch
}

// TestMetricsAfterAScriptedRun drives successes, each 429 code, a backend error, a queue
// wait and refusals before admission, then checks every SPEC §15 series by value.
func TestMetricsAfterAScriptedRun(t *testing.T) {
	bs, held := heldSet("p", "q")
	g := startGateway(t, metricsConfig, bs)
	ctx := context.Background()
	var ids []string
	must := func(a answer, status int) {
		t.Helper()
		if a.err != nil || a.status != status {
			t.Fatalf("status %d (%v), want %d: %s", a.status, a.err, status, a.body)
		}
		ids = append(ids, a.header.Get("X-Request-Id"))
	}

	must(keyed(ctx, g.URL, "demo/echo", false, "X-Request-Id", "req-METRICS-ID-1"), 200)
	must(keyed(ctx, g.URL, "demo/echo", true), 200)
	// demo/down fails twice (one retry), then its fallback serves; demo/broken fails twice.
	fell := keyed(ctx, g.URL, "demo/down", false)
	must(fell, 200)
	if m, n := fell.header.Get("X-Gateway-Model"), fell.header.Get("X-Gateway-Attempts"); m != "demo/echo" || n != "3" {
		t.Errorf("the fallback: X-Gateway-Model %q, X-Gateway-Attempts %q; want demo/echo and 3", m, n)
	}
	must(keyed(ctx, g.URL, "demo/broken", false), 503)
	must(keyed(ctx, g.URL, metricsAPIKey, false), 404) // a key where a model goes
	must(post(ctx, g.URL, "demo/echo", "", false), 401)

	pRun := keyedAsync(ctx, g.URL, "p/m")
	pCall := held.next(t)
	qRun := keyedAsync(ctx, g.URL, "q/m")
	qCall := held.next(t) // max_running (2) reached
	pQueued := keyedAsync(ctx, g.URL, "p/m")
	g.waitQueued(t, 1)
	must(keyed(ctx, g.URL, "p/m", false), 429) // provider_queue_full
	qQueued := keyedAsync(ctx, g.URL, "q/m")
	g.waitQueued(t, 2)
	must(keyed(ctx, g.URL, "demo/echo", false), 429) // gateway_overloaded: 2 running + 2 queued

	mid := scrape(t, g.URL, metricsAdminKey)
	for _, c := range []struct {
		name, provider, model string
		want                  float64
	}{
		{"tollgate_running", "p", "p/m", 1}, {"tollgate_running", "q", "q/m", 1}, {"tollgate_running", "demo", "demo/echo", 0},
		{"tollgate_queued", "p", "p/m", 1}, {"tollgate_queued", "q", "q/m", 1}, {"tollgate_queued", "demo", "demo/echo", 0},
	} {
		if got := value(t, mid, c.name, "model="+c.model, "provider="+c.provider); got != c.want {
			t.Errorf("mid-run %s{%s} = %v, want %v", c.name, c.model, got, c.want)
		}
	}

	must(await(t, pQueued), 429) // provider_queue_timeout after 1s (long enough for the checks above on a loaded machine)
	close(qCall.release)
	must(await(t, qRun), 200)
	close(held.next(t).release) // the queued q call started after its wait
	must(await(t, qQueued), 200)
	close(pCall.release)
	must(await(t, pRun), 200)
	g.waitIdle(t)

	fams := scrape(t, g.URL, metricsAdminKey)
	counts := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"tollgate_requests_total", []string{"code=", "model=demo/echo", "provider=demo", "status=200"}, 3},
		{"tollgate_requests_total", []string{"code=provider_unavailable", "model=demo/broken", "provider=demo", "status=503"}, 1},
		{"tollgate_requests_total", []string{"code=model_not_found", "model=", "provider=", "status=404"}, 1},
		{"tollgate_requests_total", []string{"code=invalid_api_key", "model=", "provider=", "status=401"}, 1},
		{"tollgate_requests_total", []string{"code=", "model=p/m", "provider=p", "status=200"}, 1},
		{"tollgate_requests_total", []string{"code=provider_queue_full", "model=p/m", "provider=p", "status=429"}, 1},
		{"tollgate_requests_total", []string{"code=provider_queue_timeout", "model=p/m", "provider=p", "status=429"}, 1},
		{"tollgate_requests_total", []string{"code=gateway_overloaded", "model=demo/echo", "provider=demo", "status=429"}, 1},
		{"tollgate_requests_total", []string{"code=", "model=q/m", "provider=q", "status=200"}, 2},
		{"tollgate_rejections_total", []string{"code=provider_queue_full", "provider=p"}, 1},
		{"tollgate_rejections_total", []string{"code=provider_queue_timeout", "provider=p"}, 1},
		{"tollgate_rejections_total", []string{"code=gateway_overloaded", "provider=demo"}, 1},
		{"tollgate_rejections_total", []string{"code=provider_queue_full", "provider=q"}, 0},
		{"tollgate_upstream_errors_total", []string{"class=unavailable", "provider=demo"}, 1},
		{"tollgate_upstream_errors_total", []string{"class=rate_limited", "provider=demo"}, 0},
		{"tollgate_upstream_errors_total", []string{"class=unavailable", "provider=p"}, 0},
		{"tollgate_retries_total", []string{"provider=p"}, 0},
		{"tollgate_retries_total", []string{"provider=demo"}, 2},
		{"tollgate_fallbacks_total", []string{"from=demo/down", "to=demo/echo"}, 1},
		{"tollgate_breaker_open", []string{"provider=p"}, 0},
		{"tollgate_breaker_open", []string{"provider=demo"}, 0},
		{"tollgate_lanes", []string{"provider=p"}, 1},
		{"tollgate_lanes", []string{"provider=demo"}, 4},
		{"tollgate_effective_lanes", []string{"provider=q"}, 1},
		{"tollgate_effective_lanes", []string{"provider=demo"}, 4},
		{"tollgate_running", []string{"model=p/m", "provider=p"}, 0},
		{"tollgate_queued", []string{"model=q/m", "provider=q"}, 0},
		{"tollgate_max_running", nil, 2},
		{"tollgate_max_admitted", nil, 4},
	}
	for _, c := range counts {
		if got := value(t, fams, c.name, c.labels...); got != c.want {
			t.Errorf("%s{%s} = %v, want %v", c.name, strings.Join(c.labels, ","), got, c.want)
		}
	}
	if n := value(t, fams, "tollgate_tokens_total", "direction=input", "model=demo/echo", "provider=demo"); n < 4 {
		t.Errorf("input tokens of demo/echo: %v, want the two prompts' tokens", n)
	}
	if n := value(t, fams, "tollgate_tokens_total", "direction=output", "model=demo/echo", "provider=demo"); n < 4 {
		t.Errorf("output tokens of demo/echo: %v", n)
	}

	top := func(h *dto.Histogram) float64 { // the largest finite bucket (the text format adds +Inf)
		b := h.GetBucket()
		return b[len(b)-2].GetUpperBound()
	}
	hist := func(name, provider, model string) *dto.Histogram {
		return sample(t, fams, name, "model="+model, "provider="+provider).GetHistogram()
	}
	if h := hist("tollgate_queue_wait_seconds", "p", "p/m"); h.GetSampleCount() != 3 || h.GetSampleSum() < 1 {
		t.Errorf("queue wait of p/m: %d samples, sum %v; want 3 with the 1s timeout among them", h.GetSampleCount(), h.GetSampleSum())
	}
	if h := hist("tollgate_queue_wait_seconds", "q", "q/m"); h.GetSampleCount() != 2 || h.GetSampleSum() <= 0 {
		t.Errorf("queue wait of q/m: %d samples, sum %v; want 2, one that waited", h.GetSampleCount(), h.GetSampleSum())
	}
	if h := hist("tollgate_queue_wait_seconds", "p", "p/m"); h.GetBucket()[0].GetUpperBound() != 0.001 ||
		top(h) != 120 {
		t.Errorf("queue wait buckets %v, want 1ms to 120s", h.GetBucket())
	}
	if h := hist("tollgate_time_to_first_byte_seconds", "demo", "demo/echo"); h.GetSampleCount() != 3 ||
		top(h) != 60 {
		t.Errorf("ttfb of demo/echo: %d samples (want the 3 answers, the fallback's included), buckets to %v s (want 60)", h.GetSampleCount(), top(h))
	}
	if h := hist("tollgate_request_duration_seconds", "demo", "demo/echo"); h.GetSampleCount() != 4 ||
		top(h) != 600 {
		t.Errorf("duration of demo/echo: %d samples (want 3 answers + 1 rejection), buckets to %v s (want 600)", h.GetSampleCount(), top(h))
	}
	if h := hist("tollgate_request_duration_seconds", "q", "q/m"); h.GetSampleCount() != 2 {
		t.Errorf("duration of q/m: %d samples", h.GetSampleCount())
	}
	if _, ok := fams["go_goroutines"]; !ok {
		t.Error("no Go runtime metrics")
	}

	// No label holds a key or a request id.
	secrets := append([]string{metricsAPIKey, metricsAdminKey, "METRICSKEY"}, ids...)
	for name, fam := range fams {
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				for _, s := range secrets {
					if s != "" && strings.Contains(l.GetValue(), s) {
						t.Errorf("%s label %s=%q holds %q", name, l.GetName(), l.GetValue(), s)
					}
				}
			}
		}
	}
}

// TestMetricsAccess: /metrics takes the admin key unless metrics.public, and is open
// without keys.
func TestMetricsAccess(t *testing.T) {
	guarded := startGateway(t, metricsConfig, nil)
	public := startGateway(t, strings.Replace(metricsConfig, "limits:", "metrics: {public: true}\nlimits:", 1), nil)
	open := startGateway(t, oneLane, nil)
	cases := []struct {
		url, key string
		status   int
	}{
		{guarded.URL, "", 401}, {guarded.URL, metricsAPIKey, 401}, {guarded.URL, metricsAdminKey, 200},
		{public.URL, "", 200}, {open.URL, "", 200},
	}
	for _, c := range cases {
		req, _ := http.NewRequest("GET", c.url+"/metrics", nil)
		if c.key != "" {
			req.Header.Set("Authorization", "Bearer "+c.key)
		}
		res, err := rawClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != c.status {
			t.Errorf("%s with key %q: %d, want %d", c.url, c.key, res.StatusCode, c.status)
		}
		if c.status == 200 && !strings.Contains(string(b), "# TYPE tollgate_lanes gauge") {
			t.Errorf("%s: not the metrics: %.200s", c.url, b)
		}
	}
}
