package fakellm

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/providers/anthropic"
	"github.com/tollgate/tollgate/providers/gemini"
	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/openai"
)

// adapters are the real adapters, each pointed at a fakellm server with keys key-a, key-b.
func adapters(t *testing.T, url string) map[string]llm.KeyedBackend {
	t.Helper()
	keys := []string{"key-a", "key-b"}
	oa, err := openai.New(openai.KindOpenAI, openai.Config{Name: "p", BaseURL: url + "/v1", Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	an, err := anthropic.New(anthropic.Config{Name: "p", BaseURL: url, Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	ge, err := gemini.New(gemini.Config{Name: "p", BaseURL: url + "/v1beta", Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	return map[string]llm.KeyedBackend{"openai": oa, "anthropic": an, "gemini": ge}
}

func chatReq(model string) *llm.Request {
	return &llm.Request{Model: model, MaxTokens: new(int), Messages: []llm.Message{{Role: "user", Content: llm.Content{Text: "hi"}}}}
}

// open calls the backend with key i and returns the *llm.Error it failed with (nil: served).
func open(t *testing.T, b llm.KeyedBackend, model string, i int) *llm.Error {
	t.Helper()
	req := chatReq(model)
	*req.MaxTokens = 64
	s, err := b.OpenWithKey(context.Background(), req, i)
	if err == nil {
		for {
			if _, err := s.Next(); err != nil {
				break
			}
		}
		s.Close()
		return nil
	}
	e, ok := errors.AsType[*llm.Error](err)
	if !ok {
		t.Fatalf("Open = %v", err)
	}
	return e
}

// TestScriptThroughAdapters: each scripted behaviour, through each real adapter, is read as
// the kind the gateway must act on, with the key that caused it and the backend's own hint.
func TestScriptThroughAdapters(t *testing.T) {
	now := time.Now()
	clock := func() time.Time { return now }
	srv := New(Options{Chunks: 2, Now: clock})
	ts := httptest.NewServer(srv)
	defer ts.Close()
	backends := adapters(t, ts.URL)
	tests := []struct {
		name     string
		script   Script
		model    string
		key      int
		wantKind llm.Kind
		wantWait time.Duration // 0: no hint expected
	}{
		{"rate-limited key", Script{Keys: map[string]KeyScript{"key-b": {Mode: "rate-limited", For: Duration(30 * time.Second)}}}, "m", 1, llm.KindUpstreamRateLimited, 30 * time.Second},
		{"the other key is served", Script{Keys: map[string]KeyScript{"key-b": {Mode: "rate-limited", For: Duration(30 * time.Second)}}}, "m", 0, -1, 0},
		{"invalid key", Script{Keys: map[string]KeyScript{"key-a": {Mode: "invalid"}}}, "m", 0, llm.KindUpstreamAuth, 0},
		{"forbidden key", Script{Keys: map[string]KeyScript{"key-a": {Mode: "forbidden"}}}, "m", 0, llm.KindUpstreamAuth, 0},
		{"throttled in a 200", Script{Keys: map[string]KeyScript{"key-a": {Mode: "throttle-200"}}}, "m", 0, llm.KindUpstreamRateLimited, 0},
		{"model down", Script{Models: map[string]ModelScript{"m": {Mode: "down"}}}, "m", 0, llm.KindProviderUnavailable, 0},
		{"model error", Script{Models: map[string]ModelScript{"m": {Mode: "error"}}}, "m", 0, llm.KindUpstream, 0},
		{"model forbidden", Script{Models: map[string]ModelScript{"m": {Mode: "forbidden"}}}, "m", 0, llm.KindUpstreamAuth, 0},
	}
	for _, tt := range tests {
		for name, b := range backends {
			if tt.name == "throttled in a 200" && name != "openai" {
				continue // DashScope's body is read by the OpenAI-compatible adapter only
			}
			t.Run(tt.name+"/"+name, func(t *testing.T) {
				if err := srv.SetScript(tt.script); err != nil {
					t.Fatal(err)
				}
				e := open(t, b, tt.model, tt.key)
				if tt.wantKind < 0 {
					if e != nil {
						t.Fatalf("not served: %v", e)
					}
					return
				}
				if e == nil {
					t.Fatal("served")
				}
				if e.Kind != tt.wantKind || e.Key != tt.key {
					t.Errorf("kind %v key %d, want %v key %d (%v)", e.Kind, e.Key, tt.wantKind, tt.key, e)
				}
				// A model refused says nothing against the key: every adapter reads it so.
				if tt.name == "model forbidden" && (e.KeyInvalid || e.UpstreamStatus != http.StatusForbidden) {
					t.Errorf("a model refused: status %d, KeyInvalid %v; want 403, false (%v)", e.UpstreamStatus, e.KeyInvalid, e)
				}
				// The hint is computed at the server's clock; the adapter reads it against
				// its own, a moment later, so instants may read up to a second short.
				if tt.wantWait > 0 && (e.RetryAfter > tt.wantWait || e.RetryAfter < tt.wantWait-time.Second) {
					t.Errorf("retry after %v, want %v", e.RetryAfter, tt.wantWait)
				}
			})
		}
	}
	// The cooldown ends exactly at its hint: the key is served again.
	srv.SetScript(Script{Keys: map[string]KeyScript{"key-b": {Mode: "rate-limited", For: Duration(30 * time.Second)}}})
	now = now.Add(30 * time.Second)
	if e := open(t, backends["openai"], "m", 1); e != nil {
		t.Errorf("after the cooldown: %v", e)
	}
	if st := srv.Stats().ByKey["key-b"]; st.Served == 0 || st.Requests <= st.Served {
		t.Errorf("per-key stats %+v", st)
	}
}

func TestModelDownAfter(t *testing.T) {
	srv := New(Options{Chunks: 2, Script: Script{Models: map[string]ModelScript{"m": {Mode: "down", After: 2}}}})
	ts := httptest.NewServer(srv)
	defer ts.Close()
	b := adapters(t, ts.URL)["openai"]
	var got []string
	for range 4 {
		if e := open(t, b, "m", 0); e != nil {
			got = append(got, e.Kind.String())
		} else {
			got = append(got, "ok")
		}
	}
	if strings.Join(got, " ") != "ok ok provider_unavailable provider_unavailable" {
		t.Errorf("calls: %v", got)
	}
	if e := open(t, b, "other", 0); e != nil {
		t.Errorf("another model is not down: %v", e)
	}
}

func TestScriptErrors(t *testing.T) {
	srv := New(Options{})
	for _, body := range []string{`{"keys":{"k":{"mode":"nope"}}}`, `{"keys":{"k":{"mode":"rate-limited"}}}`,
		`{"models":{"m":{"mode":"down","after":-1}}}`, `{"keys":{"k":{"mode":"invalid","for":"soon"}}}`, `{"kes":{}}`} {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/_fakellm/script", strings.NewReader(body)))
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "script:") {
			t.Errorf("%s: %d %s", body, rec.Code, rec.Body)
		}
	}
	for _, body := range []string{`{}`, `{"max_concurrent":3,"busy_style":"loud"}`} {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/_fakellm/limit", strings.NewReader(body)))
		if rec.Code != http.StatusBadRequest {
			t.Errorf("%s: %d %s", body, rec.Code, rec.Body)
		}
	}
}

// TestHiddenLimit: a server with hidden limit 1 refuses a second call in flight the way each
// busy style says, each transcript is pinned (testdata/fakellm/busy_*.golden), and the real
// adapter reads the stated limit where the style states one. POST /_fakellm/limit raises it
// at run time.
func TestHiddenLimit(t *testing.T) {
	tests := []struct {
		style      string
		wantKind   llm.Kind
		wantStated int
	}{
		{BusyStated, llm.KindUpstreamRateLimited, 1},
		{BusyLlamaCpp, llm.KindProviderUnavailable, 1},
		{BusyOllama, llm.KindUpstreamRateLimited, 0},
		{BusyAnthropic, llm.KindUpstreamRateLimited, 0},
	}
	for _, tt := range tests {
		t.Run(tt.style, func(t *testing.T) {
			srv := New(Options{Chunks: 2, MaxConcurrent: 1, BusyStyle: tt.style, Now: fixedNow})
			ts := httptest.NewServer(srv)
			defer ts.Close()
			// Hold the one slot with a call that hangs until cancelled.
			ctx, cancel := context.WithCancel(context.Background())
			held := make(chan struct{})
			go func() { // exits when cancel ends the hanging call
				defer close(held)
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/chat/completions",
					strings.NewReader(`{"model":"quirk-hang","messages":[]}`))
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
			}()
			deadline := time.Now().Add(5 * time.Second)
			for srv.Stats().Concurrent < 1 {
				if time.Now().After(deadline) {
					t.Fatal("the holding call never started")
				}
				time.Sleep(time.Millisecond) // polling with a deadline, not synchronising
			}
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, endpoints[0].request("m", false, ""))
			golden := filepath.Join(goldenDir, "busy_"+tt.style+".golden")
			got := transcript(rec)
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			} else if want, err := os.ReadFile(golden); err != nil || !bytes.Equal(got, want) {
				t.Errorf("transcript differs from %s (%v):\n%s", golden, err, got)
			}
			b := adapters(t, ts.URL)
			backend := b["openai"]
			if tt.style == BusyAnthropic {
				backend = b["anthropic"]
			}
			e := open(t, backend, "m", 0)
			if e == nil || e.Kind != tt.wantKind || e.StatedLimit != tt.wantStated {
				t.Fatalf("adapter read %+v, want kind %v stated %d", e, tt.wantKind, tt.wantStated)
			}
			rec = httptest.NewRecorder()
			srv.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/_fakellm/limit", strings.NewReader(`{"max_concurrent":2}`)))
			if rec.Code != http.StatusOK {
				t.Fatalf("limit: %d %s", rec.Code, rec.Body)
			}
			if e := open(t, backend, "m", 0); e != nil {
				t.Errorf("after raising the limit: %v", e)
			}
			cancel()
			<-held
		})
	}
}

// FuzzScript: whatever JSON arrives at POST /_fakellm/script, the server answers 200 or a
// 400 that names the script, and a script it took never breaks a later call.
func FuzzScript(f *testing.F) {
	f.Add(`{"keys":{"k":{"mode":"rate-limited","for":"3s"}},"models":{"m":{"mode":"down","after":1}}}`)
	f.Add(`{"keys":{"k":{"mode":"throttle-200"}}}`)
	f.Add(`{"keys":{"k":{"for":"-1s"}}}`)
	f.Add(`{"models":null}`)
	srv := New(Options{Chunks: 1})
	f.Fuzz(func(t *testing.T, body string) {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/_fakellm/script", strings.NewReader(body)))
		switch {
		case rec.Code == http.StatusBadRequest && strings.HasPrefix(rec.Body.String(), "script: "):
		case rec.Code == http.StatusOK:
		default:
			t.Fatalf("%q: %d %s", body, rec.Code, rec.Body)
		}
		req := endpoints[0].request("m", false, "")
		req.Header.Set("Authorization", "Bearer k")
		rec = httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code == 0 || rec.Body.Len() == 0 {
			t.Fatalf("a call after script %q got %d with no body", body, rec.Code)
		}
	})
}
