package upstream

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// keyFragment returns a piece of key of minLen or more characters that s shows, or "" when s
// shows none. Any longer piece contains one of minLen, so only those are looked for.
func keyFragment(s, key string, minLen int) string {
	for i := 0; i+minLen <= len(key); i++ {
		if strings.Contains(s, key[i:i+minLen]) {
			return key[i : i+minLen]
		}
	}
	return ""
}

// randomKeys are keys shaped like the vendors' (prefix, then random characters of the
// alphabets keys use), of many lengths, from a fixed seed so a failure can be replayed.
func randomKeys(n int) []string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
	prefixes := []string{"", "sk-", "sk-proj-", "sk-ant-api03-", "nvapi-", "AIza"}
	rng := rand.New(rand.NewPCG(9, 14))
	keys := make([]string, n)
	for i := range keys {
		b := []byte(prefixes[i%len(prefixes)])
		for range 8 + rng.IntN(57) {
			b = append(b, alphabet[rng.IntN(len(alphabet))])
		}
		keys[i] = string(b)
	}
	return keys
}

// TestSnippetNeverShowsPartOfAKey is the property that redacting before cutting buys: for
// every key and every position of the key against the cut, no piece of the key of 6 or
// more characters survives in the snippet.
func TestSnippetNeverShowsPartOfAKey(t *testing.T) {
	for _, key := range randomKeys(60) {
		for pos := 0; pos <= 200+len(key); pos++ {
			body := strings.Repeat(". ", pos/2) + strings.Repeat(".", pos%2) + key + " and the rest of the error body"
			if got := Snippet([]byte(body), key); keyFragment(got, key, 6) != "" {
				t.Fatalf("key %q at byte %d: snippet %q shows %q", key, pos, got, keyFragment(got, key, 6))
			}
		}
	}
}

// TestCutWithoutRedactionLeaks shows what the property guards against: cutting first leaves
// a key that straddles the cut nearly whole, and redaction no longer recognises it.
func TestCutWithoutRedactionLeaks(t *testing.T) {
	key := "sk-proj-0123456789abcdefghijklmnopqrstuvwxyz"
	body := strings.Repeat(".", 190) + key
	if got := Redact(Cut(body, 200), key); keyFragment(got, key, 6) == "" {
		t.Fatalf("cut then redacted: %q shows no part of the key; the property test would prove nothing", got)
	}
}

func TestCut(t *testing.T) {
	tests := []struct {
		s    string
		max  int
		want string
	}{
		{"abc", 3, "abc"},
		{"abcd", 3, "abc…"},
		{"ab世", 3, "ab…"}, // 世 straddles the cut: dropped whole
		{"", 0, ""},
	}
	for _, tt := range tests {
		if got := Cut(tt.s, tt.max); got != tt.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", tt.s, tt.max, got, tt.want)
		}
	}
}
