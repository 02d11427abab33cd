package openai

import (
	"net/http"
	"strings"
	"testing"
)

// TestErrorMessagesNeverShowPartOfAKey: a backend that echoes our key in a body that is not
// a recognised error gets a 300-byte excerpt in the message; for every position of the key
// against that cut, no piece of it of 6 or more characters reaches the message.
func TestErrorMessagesNeverShowPartOfAKey(t *testing.T) {
	keys := []string{"sk-proj-Zq3xXbT1lWmA9sPc7Ne4Rj2Ku8Vd5Hf0Gy6", "nvapi-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_abcDEF"}
	for _, key := range keys {
		c := newTestClient(t, KindOpenAI, "http://127.0.0.1:1/v1", "sk-other-key-0000", key)
		for pos := 0; pos <= 300+len(key); pos++ {
			body := []byte(strings.Repeat(".", pos) + key + " trailing words of an HTML page")
			for _, msg := range []string{
				c.statusError(http.StatusBadGateway, http.Header{}, body, key).Message,
				c.upstreamError("answer: "+c.snippet(body), nil).Message,
			} {
				for i := 0; i+6 <= len(key); i++ {
					if strings.Contains(msg, key[i:i+6]) {
						t.Fatalf("key at byte %d: message %q shows %q", pos, msg, key[i:i+6])
					}
				}
			}
		}
	}
}
