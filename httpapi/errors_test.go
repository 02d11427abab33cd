package httpapi

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

func TestErrorMapping(t *testing.T) {
	def := time.Second
	cases := []struct {
		err        error
		status     int
		code       string
		retryAfter string // "" = must be absent
		retryMs    string
		noRetry    bool
	}{
		{&llm.Error{Kind: llm.KindQueueFull, Provider: "p"}, 429, "provider_queue_full", "1", "1000", false},
		{&llm.Error{Kind: llm.KindQueueTimeout, RetryAfter: 2500 * time.Millisecond}, 429, "provider_queue_timeout", "3", "2500", false},
		{&llm.Error{Kind: llm.KindOverloaded, RetryAfter: 10 * time.Minute}, 429, "gateway_overloaded", "60", "60000", false},
		{&llm.Error{Kind: llm.KindUpstreamRateLimited, RetryAfter: 7 * time.Second}, 429, "upstream_rate_limited", "7", "7000", false},
		{&llm.Error{Kind: llm.KindUpstreamRateLimited, RetryAfter: 10 * time.Millisecond}, 429, "upstream_rate_limited", "1", "1000", false},
		{&llm.Error{Kind: llm.KindUpstreamQuota}, 402, "upstream_quota_exhausted", "", "", true},
		{&llm.Error{Kind: llm.KindUpstreamInvalid, Message: "bad"}, 400, "upstream_invalid_request", "", "", false},
		{&llm.Error{Kind: llm.KindUpstreamAuth}, 502, "upstream_auth_failed", "", "", true},
		{&llm.Error{Kind: llm.KindUpstream}, 502, "upstream_error", "", "", false},
		{&llm.Error{Kind: llm.KindUpstreamTruncated}, 502, "upstream_truncated", "", "", false},
		{errors.New("plain"), 502, "upstream_error", "", "", false},
		{&llm.Error{Kind: llm.KindProviderUnavailable}, 503, "provider_unavailable", "1", "1000", false},
		{&llm.Error{Kind: llm.KindRunTimeout}, 504, "provider_run_timeout", "", "", true},
		{&llm.Error{Kind: llm.KindDraining}, 503, "gateway_draining", "", "", true},
		{&llm.Error{Kind: llm.KindModelNotFound, Param: "model"}, 404, "model_not_found", "", "", false},
		{&llm.Error{Kind: llm.KindBatchImpossible}, 400, "batch_exceeds_provider_capacity", "", "", false},
		{&llm.Error{Kind: llm.KindBatchCapacity}, 429, "batch_capacity_unavailable", "1", "1000", false},
		{&llm.Error{Kind: llm.KindClientConcurrency}, 429, "client_concurrency_limited", "1", "1000", false},
		{&llm.Error{Kind: llm.KindClientRateLimited, RetryAfter: 4200 * time.Millisecond}, 429, "client_rate_limited", "5", "4200", false},
		{&llm.Error{Kind: llm.KindInvalidAPIKey}, 401, "invalid_api_key", "", "", true},
	}
	for _, tc := range cases {
		t.Run(tc.code, func(t *testing.T) {
			w := httptest.NewRecorder()
			toAPIError(tc.err, def).write(w)
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d", w.Code, tc.status)
			}
			h := w.Header()
			if h.Get("Retry-After") != tc.retryAfter || h.Get("retry-after-ms") != tc.retryMs {
				t.Errorf("Retry-After %q retry-after-ms %q, want %q %q", h.Get("Retry-After"), h.Get("retry-after-ms"), tc.retryAfter, tc.retryMs)
			}
			if (h.Get("x-should-retry") == "false") != tc.noRetry {
				t.Errorf("x-should-retry %q", h.Get("x-should-retry"))
			}
			var body struct {
				Error map[string]any `json:"error"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			if body.Error["code"] != tc.code || body.Error["message"] == "" || body.Error["type"] == "" {
				t.Errorf("body %s", w.Body)
			}
			_, hasMs := body.Error["retry_after_ms"]
			if hasMs != (tc.retryMs != "") {
				t.Errorf("retry_after_ms present=%v: %s", hasMs, w.Body)
			}
		})
	}
}

// TestNoRetryableStatusForPermanentErrors guards SPEC §4: SDKs retry 408, 409, 429 and 5xx,
// so an error that waiting cannot fix either avoids those statuses or says x-should-retry: false.
func TestNoRetryableStatusForPermanentErrors(t *testing.T) {
	for k, s := range statusOf {
		retryableStatus := s.status == 408 || s.status == 409 || s.status == 429 || s.status >= 500
		// A backend's failure, a cut-off answer included, may not recur on a new attempt.
		waitingHelps := k.Retryable() || k == llm.KindProviderUnavailable || k == llm.KindUpstream || k == llm.KindUpstreamTruncated
		if retryableStatus && !waitingHelps && !s.noRetry {
			t.Errorf("%s: status %d invites SDK retries that cannot help", k, s.status)
		}
	}
}
