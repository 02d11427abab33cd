package fakellm

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Script is scripted per-key and per-model behaviour: which API keys are
// rate-limited, invalid or throttled inside a 200, and which models are down or go down after
// some calls. It is set with Options.Script, replaced at run time with POST /_fakellm/script
// (the same JSON), and applies to every API; keys are read from Authorization: Bearer,
// x-api-key, x-goog-api-key or ?key=.
type Script struct {
	// Keys maps an API key to how the server treats calls made with it.
	Keys map[string]KeyScript `json:"keys,omitempty"`
	// Models maps a model name to how it behaves.
	Models map[string]ModelScript `json:"models,omitempty"`
}

// KeyScript is one key's behaviour.
type KeyScript struct {
	// Mode is one of:
	//   rate-limited  429 for For (from when the script was set), with each API's real hint:
	//                 retry-after, retry-after-ms and x-ratelimit-* (OpenAI),
	//                 retry-after and anthropic-ratelimit-requests-* (Anthropic), a
	//                 RetryInfo retryDelay (Gemini); served normally afterwards
	//   invalid       401: the API's invalid-key error (Gemini: 400 API_KEY_INVALID)
	//   forbidden     403: the API's permission error
	//   throttle-200  HTTP 200 carrying DashScope's Throttling.RateQuota error, for For
	//                 (zero: always)
	Mode string `json:"mode"`
	// For is how long rate-limited and throttle-200 last, e.g. "30s".
	For Duration `json:"for,omitempty"`

	until time.Time // For after the script was set; zero: no end
}

// ModelScript is one model's behaviour.
type ModelScript struct {
	// Mode is "down" (503, Anthropic 529 overloaded), "error" (500) or "forbidden" (403:
	// the API's refusal of this model for a key that is otherwise good, whatever the key).
	Mode string `json:"mode"`
	// After is how many calls the model serves before it goes down; 0: down from the start.
	After int `json:"after,omitempty"`
}

// Duration is a time.Duration written in JSON as "30s".
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string such as \"30s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return fmt.Errorf("bad duration %q", s)
	}
	*d = Duration(v)
	return nil
}

var (
	keyModes   = []string{"rate-limited", "invalid", "forbidden", "throttle-200"}
	modelModes = []string{"down", "error", "forbidden"}
)

// Check names the first problem in sc.
func (sc *Script) Check() error {
	for k, ks := range sc.Keys {
		if !contains(keyModes, ks.Mode) {
			return fmt.Errorf("key %q: unknown mode %q (known: %s)", k, ks.Mode, strings.Join(keyModes, ", "))
		}
		if ks.Mode == "rate-limited" && ks.For <= 0 {
			return fmt.Errorf("key %q: rate-limited needs \"for\", e.g. \"30s\"", k)
		}
	}
	for m, ms := range sc.Models {
		if !contains(modelModes, ms.Mode) {
			return fmt.Errorf("model %q: unknown mode %q (known: %s)", m, ms.Mode, strings.Join(modelModes, ", "))
		}
		if ms.After < 0 {
			return fmt.Errorf("model %q: after must be 0 or more", m)
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// scripted is the server's live script and its per-model call counts.
type scripted struct {
	mu     sync.Mutex
	script Script
	calls  map[string]int // per model with a script: calls seen
	byKey  map[string]*keyStats
}

type keyStats struct{ Requests, Served int64 }

// set replaces the script at now: cooldowns count from now.
func (s *scripted) set(sc Script, now time.Time) error {
	if err := sc.Check(); err != nil {
		return err
	}
	keys := make(map[string]KeyScript, len(sc.Keys))
	for k, ks := range sc.Keys {
		if ks.For > 0 {
			ks.until = now.Add(time.Duration(ks.For))
		}
		keys[k] = ks
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = Script{Keys: keys, Models: sc.Models}
	s.calls = map[string]int{}
	return nil
}

// keyFor reads the API key a request carries.
func keyFor(r *http.Request) string {
	if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return v
	}
	for _, h := range []string{"X-Api-Key", "X-Goog-Api-Key"} {
		if v := r.Header.Get(h); v != "" {
			return v
		}
	}
	return r.URL.Query().Get("key")
}

// verdict is what the script says about one call: a failure to answer with, or none.
func (s *scripted) verdict(c *call, key string, now time.Time) (failure, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if key != "" { // requests without a key are not counted by key
		if s.byKey == nil {
			s.byKey = map[string]*keyStats{}
		}
		ks := s.byKey[key]
		if ks == nil {
			ks = &keyStats{}
			s.byKey[key] = ks
		}
		ks.Requests++
	}
	if k, ok := s.script.Keys[key]; ok && (k.until.IsZero() || now.Before(k.until)) {
		switch k.Mode {
		case "rate-limited":
			return keyRateLimited(c, k.until.Sub(now), now), true
		case "invalid":
			if c.api == apiGemini { // the ErrorInfo reason is what tells a bad key from a bad request
				return failure{http.StatusBadRequest, "application/json", nil, []byte(geminiBadKeyBody)}, true
			}
			return jsonFailure(c.api, invalidKey(c.api)), true
		case "forbidden":
			return jsonFailure(c.api, forbidden(c.api)), true
		case "throttle-200":
			return failure{http.StatusOK, "application/json", nil, []byte(dashScopeBody)}, true
		}
	}
	if m, ok := s.script.Models[c.model]; ok {
		s.calls[c.model]++
		if s.calls[c.model] > m.After {
			switch m.Mode {
			case "error":
				return jsonFailure(c.api, internalError(c.api)), true
			case "forbidden":
				return jsonFailure(c.api, modelForbidden(c.api)), true
			}
			return jsonFailure(c.api, overloaded(c.api)), true
		}
	}
	return failure{}, false
}

// served counts a call answered as scripted with key.
func (s *scripted) served(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ks := s.byKey[key]; ks != nil {
		ks.Served++
	}
}

// keyCounts copies the per-key counters.
func (s *scripted) keyCounts() map[string]keyStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]keyStats, len(s.byKey))
	for k, v := range s.byKey {
		out[k] = *v
	}
	return out
}

// keyRateLimited is a 429 for a key that is limited for left more, with each API's real hint.
func keyRateLimited(c *call, left time.Duration, now time.Time) failure {
	left = max(left, time.Millisecond).Round(time.Millisecond)
	secs := int((left + time.Second - 1) / time.Second)
	msg := fmt.Sprintf("Rate limit reached for requests. Please try again in %s.", left)
	switch c.api {
	case apiAnthropic:
		return jsonFailure(c.api, rateLimited(c.api, msg),
			[2]string{"Retry-After", fmt.Sprint(secs)},
			[2]string{"Anthropic-Ratelimit-Requests-Limit", "50"},
			[2]string{"Anthropic-Ratelimit-Requests-Remaining", "0"},
			[2]string{"Anthropic-Ratelimit-Requests-Reset", now.Add(left).UTC().Format(time.RFC3339Nano)})
	case apiGemini:
		body := `{"error":{"code":429,"message":` + string(appendString(nil, msg)) + `,"status":"RESOURCE_EXHAUSTED","details":[` +
			`{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier","quotaValue":"10"}]},` +
			`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"` + fmt.Sprintf("%gs", left.Seconds()) + `"}]}}`
		return failure{http.StatusTooManyRequests, "application/json", nil, []byte(body)}
	}
	return jsonFailure(c.api, rateLimited(c.api, msg),
		[2]string{"Retry-After", fmt.Sprint(secs)},
		[2]string{"Retry-After-Ms", fmt.Sprint(left.Milliseconds())},
		[2]string{"X-Ratelimit-Limit-Requests", "60"},
		[2]string{"X-Ratelimit-Remaining-Requests", "0"},
		[2]string{"X-Ratelimit-Reset-Requests", left.String()})
}

const geminiBadKeyBody = `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[` +
	`{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}`

func invalidKey(a api) apiError {
	if a == apiAnthropic {
		return apiError{http.StatusUnauthorized, "authentication_error", "", "invalid x-api-key"}
	}
	return apiError{http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "Incorrect API key provided."}
}

func forbidden(a api) apiError {
	switch a {
	case apiAnthropic:
		return apiError{http.StatusForbidden, "permission_error", "", "Your API key does not have permission to use the specified resource."}
	case apiGemini:
		return apiError{http.StatusForbidden, "PERMISSION_DENIED", "", "Permission denied on resource project."}
	}
	return apiError{http.StatusForbidden, "invalid_request_error", "unsupported_country_region_territory", "Country, region, or territory not supported."}
}

// modelForbidden is each API's 403 for a model the key may not use (PROTOCOLS §3, §4, §5):
// it says nothing against the key itself.
func modelForbidden(a api) apiError {
	switch a {
	case apiAnthropic:
		return apiError{http.StatusForbidden, "permission_error", "", "Your API key does not have permission to use the specified resource."}
	case apiGemini:
		return apiError{http.StatusForbidden, "PERMISSION_DENIED", "", "Permission denied on resource project."}
	}
	return apiError{http.StatusForbidden, "invalid_request_error", "Model.AccessDenied", "Model access denied."}
}

// SetScript replaces the per-key and per-model script; rate-limited keys count their time
// from now.
func (s *Server) SetScript(sc Script) error { return s.script.set(sc, s.opts.Now()) }

// SetLimit changes the hidden concurrency limit (0: none) and, unless style is "", how a
// request beyond it is refused. Requests already running are not touched: with a lower
// limit, new ones are refused until enough have ended.
func (s *Server) SetLimit(n int, style string) error {
	if err := CheckBusyStyle(style); err != nil {
		return err
	}
	s.limit.Store(int64(max(n, 0)))
	if style != "" {
		s.busy.Store(&style)
	}
	return nil
}

// serveScript is POST /_fakellm/script: the body is a Script in JSON.
func (s *Server) serveScript(w http.ResponseWriter, r *http.Request) {
	var sc Script
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sc); err != nil {
		http.Error(w, "script: "+err.Error(), http.StatusBadRequest)
		return
	}
	if err := s.SetScript(sc); err != nil {
		http.Error(w, "script: "+err.Error(), http.StatusBadRequest)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"keys": len(sc.Keys), "models": len(sc.Models)})
}

// serveLimit is POST /_fakellm/limit: {"max_concurrent": 6, "busy_style": "llamacpp"}
// (busy_style optional).
func (s *Server) serveLimit(w http.ResponseWriter, r *http.Request) {
	var body struct {
		MaxConcurrent *int   `json:"max_concurrent"`
		BusyStyle     string `json:"busy_style"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || body.MaxConcurrent == nil {
		http.Error(w, `limit: want {"max_concurrent": N, "busy_style": "..."}`, http.StatusBadRequest)
		return
	}
	if err := s.SetLimit(*body.MaxConcurrent, body.BusyStyle); err != nil {
		http.Error(w, "limit: "+err.Error(), http.StatusBadRequest)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"max_concurrent": s.limit.Load(), "busy_style": *s.busy.Load()})
}
