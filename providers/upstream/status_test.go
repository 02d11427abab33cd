package upstream

import (
	"net/http"
	"testing"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

func TestKindForStatus(t *testing.T) {
	tests := []struct {
		status int
		want   llm.Kind
	}{
		{400, llm.KindUpstreamInvalid},
		{404, llm.KindUpstreamInvalid},
		{413, llm.KindUpstreamInvalid},
		{422, llm.KindUpstreamInvalid},
		{409, llm.KindUpstreamInvalid},
		{451, llm.KindUpstreamInvalid},
		{401, llm.KindUpstreamAuth},
		{403, llm.KindUpstreamAuth},
		{402, llm.KindUpstreamQuota},
		{408, llm.KindUpstream},
		{429, llm.KindUpstreamRateLimited},
		{500, llm.KindUpstream},
		{502, llm.KindUpstream},
		{503, llm.KindProviderUnavailable},
		{529, llm.KindProviderUnavailable},
		{504, llm.KindUpstream},
		{599, llm.KindUpstream},
		{200, llm.KindUpstream},
		{302, llm.KindUpstream},
	}
	for _, tt := range tests {
		if got := KindForStatus(tt.status); got != tt.want {
			t.Errorf("KindForStatus(%d) = %v, want %v", tt.status, got, tt.want)
		}
	}
}

func TestStatusError(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	h := http.Header{"Retry-After": {"3"}}
	tests := []struct {
		status    int
		code, msg string
		wantKind  llm.Kind
		wantWait  time.Duration
		wantMsg   string
	}{
		{429, "rate_limit_exceeded", "slow down", llm.KindUpstreamRateLimited, 3 * time.Second, "slow down"},
		{503, "", "", llm.KindProviderUnavailable, 3 * time.Second, "backend answered HTTP 503"},
		{402, "insufficient_balance", "pay", llm.KindUpstreamQuota, 0, "pay"},
		{400, "bad", "no", llm.KindUpstreamInvalid, 0, "no"},
	}
	for _, tt := range tests {
		e := StatusError("p", tt.status, h, tt.code, tt.msg, now)
		if e.Kind != tt.wantKind || e.RetryAfter != tt.wantWait || e.Message != tt.wantMsg ||
			e.UpstreamStatus != tt.status || e.UpstreamCode != tt.code || e.Provider != "p" {
			t.Errorf("StatusError(%d) = %+v", tt.status, e)
		}
	}
}
