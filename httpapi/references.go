package httpapi

import (
	"encoding/base64"
	"io"
	"math"
	"strings"
)

// The checks every ingress format makes of what a conversation refers to and of the token
// counts it asks for, so that a request no backend could serve is answered here, naming the
// field, instead of being queued, admitted and refused by the backend (or, by a lenient
// one, acted on).

// maxTokenCount is the most tokens a request may ask for (max_tokens, max_completion_tokens,
// max_output_tokens, thinking.budget_tokens): the largest 32-bit integer, the width of the
// backends' own fields (Gemini's maxOutputTokens is an int32), and far above any model's
// output. A larger count is no limit a backend can apply, and admission would reserve it
// against a token budget.
const maxTokenCount = math.MaxInt32

// checkTokens refuses a token count below lo or above maxTokenCount, naming the field.
func checkTokens(param string, v *int, lo int) *apiError {
	switch {
	case v == nil:
		return nil
	case *v < lo:
		return invalidf(param, "%s must be at least %d, got %d", param, lo, *v)
	case *v > maxTokenCount:
		return invalidf(param, "%s must be at most %d, got %d", param, maxTokenCount, *v)
	}
	return nil
}

// badBase64 reports whether data is not standard base64 (RFC 4648 §4), as an image's bytes
// must be; missing padding is allowed, and line breaks are skipped as MIME's decoders skip
// them. It decodes in a small buffer, not into a copy of the image.
func badBase64(data string) bool {
	data = strings.TrimRight(data, "=\r\n")
	dec := base64.NewDecoder(base64.RawStdEncoding, strings.NewReader(data))
	_, err := io.Copy(io.Discard, dec)
	return err != nil
}

// checkImageURL refuses an image URL that is a data: URI but not a valid one: no comma
// before its data, or data marked base64 that is not (badBase64). Other URLs are the
// backend's to fetch.
func checkImageURL(param, url string) *apiError {
	rest, ok := cutPrefixFold(url, "data:")
	if !ok {
		return nil
	}
	meta, data, ok := strings.Cut(rest, ",")
	switch {
	case !ok:
		return invalidf(param, "%s is a data: URI with no comma before its data", param)
	case strings.HasSuffix(strings.ToLower(meta), ";base64") && badBase64(data):
		return invalidf(param, "%s is a data: URI whose data is not valid base64", param)
	}
	return nil
}

// cutPrefixFold is strings.CutPrefix with the prefix matched without regard to ASCII case,
// as a URI's scheme is (RFC 3986 §3.1).
func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) < len(prefix) || !strings.EqualFold(s[:len(prefix)], prefix) {
		return s, false
	}
	return s[len(prefix):], true
}

// callIDs are the ids of the tool calls a conversation has made so far, so that a tool
// result can be checked to answer one of them: every backend refuses a result for a call it
// never saw, after the request waited its turn.
type callIDs map[string]bool
