package fakellm

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serve starts s on a loopback httptest server, closed at the end of the test.
func serve(t *testing.T, s *Server) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(s)
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	return ts
}

// post sends body to path with the optional mode header.
func post(ctx context.Context, t *testing.T, ts *httptest.Server, path, body, mode string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if mode != "" {
		req.Header.Set("X-Fakellm-Mode", mode)
	}
	return ts.Client().Do(req)
}

// eventually polls cond until it holds or a deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond) // polling, not synchronisation
	}
}

const chatStreamBody = `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`

func TestHangUntilClientLeaves(t *testing.T) {
	srv := newTestServer(Options{})
	ts := serve(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { // exits when the request fails, which cancel guarantees
		resp, err := post(ctx, t, ts, "/v1/chat/completions", chatStreamBody, "hang")
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	eventually(t, "the hanging request to arrive", func() bool { return srv.Stats().Concurrent == 1 })
	select {
	case err := <-errc:
		t.Fatalf("hang answered: %v", err)
	default:
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("client error %v, want context.Canceled", err)
	}
	eventually(t, "client_gone to count it", func() bool {
		st := srv.Stats()
		return st.ClientGone == 1 && st.Concurrent == 0 && st.Completed == 0
	})
}

func TestClientGoneMidStream(t *testing.T) {
	// A long chunk interval keeps the stream open; the client leaves after the first event.
	srv := newTestServer(Options{ChunkInterval: time.Hour})
	ts := serve(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := post(ctx, t, ts, "/v1/chat/completions", chatStreamBody, "")
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "data: {") {
		t.Fatalf("first line %q, %v", line, err)
	}
	cancel()
	resp.Body.Close()
	eventually(t, "client_gone to count the cancelled stream", func() bool {
		st := srv.Stats()
		return st.ClientGone == 1 && st.Concurrent == 0
	})
	if st := srv.Stats(); st.Completed != 0 || st.Requests != 1 || st.MaxConcurrent != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestDrop(t *testing.T) {
	srv := newTestServer(Options{})
	ts := serve(t, srv)
	for _, stream := range []bool{true, false} {
		body := `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":` + boolStr(stream) + `}`
		resp, err := post(context.Background(), t, ts, "/v1/chat/completions", body, "drop")
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("stream=%v: read error %v after %q, want unexpected EOF", stream, err, got)
		}
		if stream && strings.Count(string(got), "data: ") != 1+midstreamAfter {
			t.Errorf("stream cut after %d events, want %d:\n%s", strings.Count(string(got), "data: "), 1+midstreamAfter, got)
		}
	}
	if st := srv.Stats(); st.Completed != 0 || st.ClientGone != 0 || st.Requests != 2 {
		t.Fatalf("a deliberate drop is neither completed nor the client's doing: %+v", st)
	}
}

func TestConcurrencyLimit(t *testing.T) {
	srv := newTestServer(Options{MaxConcurrent: 1})
	ts := serve(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { // holds the only slot until cancel
		defer close(done)
		resp, err := post(ctx, t, ts, "/v1/chat/completions", chatStreamBody, "hang")
		if err == nil {
			resp.Body.Close()
		}
	}()
	eventually(t, "the first request to hold the slot", func() bool { return srv.Stats().Concurrent == 1 })

	for _, ep := range []struct{ path, body, want string }{
		{"/v1/chat/completions", chatStreamBody, `"code":"rate_limit_exceeded"`},
		{"/v1/messages", `{"model":"m","max_tokens":10,"messages":[]}`, `"type":"rate_limit_error"`},
		{"/v1beta/models/m:generateContent", `{}`, `"status":"RESOURCE_EXHAUSTED"`},
	} {
		resp, err := post(context.Background(), t, ts, ep.path, ep.body, "")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), ep.want) {
			t.Fatalf("%s: status %d body %s", ep.path, resp.StatusCode, body)
		}
		for k, v := range map[string]string{"Retry-After": "1", "Retry-After-Ms": "1000",
			"X-Ratelimit-Limit-Requests": "1", "X-Ratelimit-Remaining-Requests": "0", "X-Ratelimit-Reset-Requests": "1s"} {
			if got := resp.Header.Get(k); got != v {
				t.Errorf("%s: header %s = %q, want %q", ep.path, k, got, v)
			}
		}
	}
	cancel()
	<-done
	eventually(t, "the slot to free", func() bool { return srv.Stats().Concurrent == 0 })
	st := srv.Stats()
	if st.Rejected != 3 || st.Requests != 4 || st.MaxConcurrent != 1 || st.ClientGone != 1 {
		t.Fatalf("stats %+v", st)
	}

	// With the slot free a request is admitted and told how much room is left.
	resp, err := post(context.Background(), t, ts, "/v1/chat/completions", `{"model":"m","messages":[]}`, "")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-Ratelimit-Remaining-Requests") != "0" ||
		resp.Header.Get("X-Ratelimit-Limit-Requests") != "1" {
		t.Fatalf("admitted request: %d %v", resp.StatusCode, resp.Header)
	}
}

func TestStatsEndpoints(t *testing.T) {
	srv := newTestServer(Options{})
	ts := serve(t, srv)
	for range 3 {
		resp, err := post(context.Background(), t, ts, "/v1/chat/completions", chatStreamBody, "")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	getStats := func(method, path string) Stats {
		req, _ := http.NewRequest(method, ts.URL+path, nil)
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var st Stats
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := getStats("GET", "/_fakellm/stats"); !reflect.DeepEqual(st, Stats{Requests: 3, Completed: 3, MaxConcurrent: 1}) {
		t.Fatalf("stats %+v", st)
	}
	if st := getStats("POST", "/_fakellm/reset"); !reflect.DeepEqual(st, Stats{}) {
		t.Fatalf("after reset %+v", st)
	}
	if st := srv.Stats(); !reflect.DeepEqual(st, Stats{}) {
		t.Fatalf("Stats after reset %+v", st)
	}
}

func TestPacing(t *testing.T) {
	// 5 chunks 20ms apart take at least 80ms; a latency of 30ms adds to it. The lower bound
	// cannot be met by a server that ignores the options.
	srv := newTestServer(Options{Chunks: 5, ChunkInterval: 20 * time.Millisecond, Latency: 30 * time.Millisecond})
	ts := serve(t, srv)
	start := time.Now()
	resp, err := post(context.Background(), t, ts, "/v1/chat/completions", chatStreamBody, "")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if d := time.Since(start); d < 110*time.Millisecond {
		t.Fatalf("answer took %v, want at least 110ms", d)
	}
	if New(Options{TokensPerSecond: 50}).interval != 20*time.Millisecond {
		t.Fatal("TokensPerSecond 50 should mean a 20ms interval")
	}
}

func TestModelLists(t *testing.T) {
	srv := newTestServer(Options{Models: []string{"a", "b"}})
	tests := []struct {
		path, header, want string
	}{
		{"/v1/models", "", `{"object":"list","data":[{"id":"a","object":"model","created":1767225600,"owned_by":"fakellm"},{"id":"b","object":"model","created":1767225600,"owned_by":"fakellm"}]}`},
		{"/v1/models", "2023-06-01", `{"data":[{"type":"model","id":"a","display_name":"a","created_at":"2026-01-01T00:00:00Z"},{"type":"model","id":"b","display_name":"b","created_at":"2026-01-01T00:00:00Z"}],"has_more":false,"first_id":"a","last_id":"b"}`},
		{"/v1beta/models", "", `{"models":[{"name":"models/a","displayName":"a","inputTokenLimit":1048576,"outputTokenLimit":65536,"supportedGenerationMethods":["generateContent","streamGenerateContent","countTokens"]},{"name":"models/b","displayName":"b","inputTokenLimit":1048576,"outputTokenLimit":65536,"supportedGenerationMethods":["generateContent","streamGenerateContent","countTokens"]}]}`},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", tt.path, nil)
		if tt.header != "" {
			r.Header.Set("Anthropic-Version", tt.header)
		}
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, r)
		if rec.Code != 200 || rec.Body.String() != tt.want {
			t.Errorf("%s: %d %s\nwant %s", tt.path, rec.Code, rec.Body, tt.want)
		}
	}
	if st := srv.Stats(); st.Requests != 0 {
		t.Errorf("model lists count as generation requests: %+v", st)
	}
}

func TestCountTokens(t *testing.T) {
	rec := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "/v1/messages/count_tokens",
		strings.NewReader(`{"model":"m","system":"one two","messages":[{"role":"user","content":[{"type":"tool_result","content":[{"type":"text","text":"three four five"}]}]}]}`))
	newTestServer(Options{}).ServeHTTP(rec, r)
	if rec.Code != 200 || rec.Body.String() != `{"input_tokens":5}` {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
}

// Under a burst well above the limit, the server never runs more than MaxConcurrent and
// accounts for every request exactly once.
func TestConcurrencyBurst(t *testing.T) {
	const limit, clients = 4, 24
	srv := newTestServer(Options{MaxConcurrent: limit, Chunks: 5, ChunkInterval: time.Millisecond})
	ts := serve(t, srv)
	ts.Client().Transport.(*http.Transport).MaxIdleConnsPerHost = clients
	statuses := make(chan int, clients)
	start := make(chan struct{})
	for range clients {
		go func() { // exits after one request
			<-start
			resp, err := post(context.Background(), t, ts, "/v1/chat/completions", chatStreamBody, "")
			if err != nil {
				statuses <- 0
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			statuses <- resp.StatusCode
		}()
	}
	close(start)
	ok, limited := 0, 0
	for range clients {
		switch <-statuses {
		case 200:
			ok++
		case 429:
			limited++
		default:
			t.Error("a request failed outright")
		}
	}
	// A handler counts its call done after its last write, which the client may read first.
	eventually(t, "every call to be counted", func() bool {
		st := srv.Stats()
		return st.Concurrent == 0 && st.Completed+st.Rejected == int64(clients)
	})
	st := srv.Stats()
	if st.MaxConcurrent > limit || st.Concurrent != 0 || st.Requests != clients ||
		st.Completed != int64(ok) || st.Rejected != int64(limited) || ok == 0 {
		t.Fatalf("%d ok, %d limited; stats %+v", ok, limited, st)
	}
}

func TestHold(t *testing.T) {
	// Hold 200ms over 4 chunks: each content chunk comes 50ms after the one before, the first
	// 50ms after the start, so a stream spans the hold; a whole answer waits all of it. Lower
	// bounds only: a loaded machine makes everything later, never earlier.
	const hold = 200 * time.Millisecond
	ts := serve(t, newTestServer(Options{Chunks: 4, Hold: hold}))
	start := time.Now()
	resp, err := post(context.Background(), t, ts, "/v1/chat/completions", chatStreamBody, "")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var content []time.Duration // when each content chunk arrived
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if l := sc.Text(); strings.Contains(l, `"content":"`) && !strings.Contains(l, `"content":""`) {
			content = append(content, time.Since(start))
		}
	}
	if len(content) != 4 {
		t.Fatalf("%d content chunks, want 4", len(content))
	}
	if content[0] < hold/4 || content[3]-content[0] < 3*hold/4 {
		t.Fatalf("content chunks at %v: want the first after %v and the last %v after it", content, hold/4, 3*hold/4)
	}

	start = time.Now()
	resp, err = post(context.Background(), t, ts, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if d := time.Since(start); d < hold {
		t.Fatalf("a whole answer took %v, want at least the hold %v", d, hold)
	}
}

func TestConnectionsCounted(t *testing.T) {
	srv := newTestServer(Options{})
	ts := httptest.NewUnstartedServer(srv)
	ts.Config.ConnState = srv.ConnState
	ts.Start()
	t.Cleanup(ts.Close)
	call := func(c *http.Client) {
		t.Helper()
		resp, err := c.Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(chatStreamBody))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	keepAlive := &http.Client{Transport: &http.Transport{}}
	defer keepAlive.CloseIdleConnections()
	call(keepAlive)
	call(keepAlive) // the same connection again
	other := &http.Client{Transport: &http.Transport{}}
	defer other.CloseIdleConnections()
	call(other)
	srv.ResetStats()
	if got := srv.Stats().Connections; got != 2 {
		t.Fatalf("Connections = %d after three calls on two keep-alive clients, want 2", got)
	}
}
