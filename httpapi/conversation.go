package httpapi

import "net/http"

// conversationHeaders name a conversation after a body's prompt_cache_key, in this order:
// Codex sends session_id (conversation_id in newer versions) with every turn of a session,
// Claude Code X-Claude-Code-Session-Id.
var conversationHeaders = []string{"session_id", "conversation_id", "X-Claude-Code-Session-Id"}

// conversationOf names the request's conversation for session affinity (SPEC §19): the
// first of the body's prompt_cache_key (cacheKey), the agents' session headers, and the
// body's user (OpenAI user, or Anthropic metadata.user_id, which a Messages body's
// translation carries as user); "" when it names none.
func conversationOf(h http.Header, cacheKey, user string) string {
	if cacheKey != "" {
		return cacheKey
	}
	for _, k := range conversationHeaders {
		if v := h.Get(k); v != "" {
			return v
		}
	}
	return user
}
