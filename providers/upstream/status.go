package upstream

import (
	"fmt"
	"net/http"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// KindForStatus classifies a backend's HTTP status when its body says nothing more specific.
// 408 and 504 are the backend's own timeouts (KindUpstream): the gateway may retry them, but
// they do not mean the provider is down for everyone, which 503 and 529 do.
func KindForStatus(status int) llm.Kind {
	switch status {
	case http.StatusBadRequest, http.StatusNotFound, http.StatusRequestEntityTooLarge,
		http.StatusUnprocessableEntity:
		return llm.KindUpstreamInvalid
	case http.StatusUnauthorized, http.StatusForbidden:
		return llm.KindUpstreamAuth
	case http.StatusPaymentRequired:
		return llm.KindUpstreamQuota
	case http.StatusTooManyRequests:
		return llm.KindUpstreamRateLimited
	case http.StatusServiceUnavailable, 529:
		return llm.KindProviderUnavailable
	case http.StatusRequestTimeout, http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusGatewayTimeout:
		return llm.KindUpstream
	}
	if status >= 400 && status < 500 {
		return llm.KindUpstreamInvalid
	}
	return llm.KindUpstream
}

// StatusError builds the *llm.Error for a backend's non-2xx answer when the adapter has read
// its code and message (either may be empty). The wait advised by the headers is kept only for
// kinds where waiting helps, so a quota error never tells the client "try again in 1s".
func StatusError(provider string, status int, h http.Header, code, message string, now time.Time) *llm.Error {
	kind := KindForStatus(status)
	if message == "" {
		message = fmt.Sprintf("backend answered HTTP %d", status)
	}
	e := &llm.Error{Kind: kind, Message: message, Provider: provider, UpstreamStatus: status, UpstreamCode: code}
	if kind == llm.KindUpstreamRateLimited || kind == llm.KindProviderUnavailable {
		e.RetryAfter = RetryHint(h, now)
	}
	return e
}
