package httpapi

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestConversationOf(t *testing.T) {
	tests := []struct {
		name           string
		headers        map[string]string
		cacheKey, user string
		want           string
	}{
		{"none", nil, "", "", ""},
		{"prompt_cache_key first", map[string]string{"session_id": "s", "X-Claude-Code-Session-Id": "c"}, "pk", "u", "pk"},
		{"Codex session_id", map[string]string{"session_id": "s", "conversation_id": "cv"}, "", "u", "s"},
		{"Codex conversation_id", map[string]string{"conversation_id": "cv"}, "", "u", "cv"},
		{"Claude Code's header", map[string]string{"x-claude-code-session-id": "c"}, "", "u", "c"},
		{"user (or metadata.user_id) last", map[string]string{"X-Other": "x"}, "", "u", "u"},
	}
	for _, tt := range tests {
		h := http.Header{}
		for k, v := range tt.headers {
			h.Set(k, v)
		}
		if got := conversationOf(h, tt.cacheKey, tt.user); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestConversationFromBodies: each ingress format's parse reads the body's names.
func TestConversationFromBodies(t *testing.T) {
	chat, a := parseChat([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"prompt_cache_key":"pk","user":"u"}`))
	if a != nil || chat.Conversation != "pk" || chat.User != "u" {
		t.Errorf("chat: %+v %v", chat, a)
	}
	resp, a := parseResponses([]byte(`{"model":"m","input":"hi","prompt_cache_key":"rk"}`), nil)
	if a != nil || resp.Conversation != "rk" {
		t.Errorf("responses: %v %v", resp, a)
	}
	msg, a := parseMessages([]byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"metadata":{"user_id":"uid"}}`), httptest.NewRequest("POST", "/v1/messages", nil))
	if a != nil || conversationOf(http.Header{}, msg.Conversation, msg.User) != "uid" {
		t.Errorf("messages: %v %v", msg, a)
	}
	if _, a := parseChat([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"prompt_cache_key":5}`)); a == nil || a.param != "prompt_cache_key" {
		t.Errorf("a number for prompt_cache_key: %+v, want an error naming it", a)
	}
}
