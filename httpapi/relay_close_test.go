package httpapi

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/providers/llm"
)

// closeWatcher is a recorder that notes, at each write, whether the call's stream was
// closed by then.
type closeWatcher struct {
	*httptest.ResponseRecorder
	st          *script
	writes      int
	lastWasOpen bool
}

func (w *closeWatcher) Write(b []byte) (int, error) {
	w.writes++
	w.lastWasOpen = !w.st.closed
	return w.ResponseRecorder.Write(b)
}

// TestRelayClosesBeforeTheLastWrite: in every answer format, streamed or whole, the backend
// stream is closed (its lanes given back) before the answer's last bytes are written, so a
// client that sends its next call the moment it has the answer finds the lane free.
func TestRelayClosesBeforeTheLastWrite(t *testing.T) {
	for _, tc := range []struct {
		name, path, body string
		chunks           []llm.Chunk
	}{
		{"chat stream", "/v1/chat/completions", `{"model":"p/m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, structuredChunks},
		{"chat whole", "/v1/chat/completions", `{"model":"p/m","messages":[{"role":"user","content":"hi"}]}`, structuredChunks},
		{"chat relayed stream", "/v1/chat/completions", `{"model":"p/m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, raw},
		{"chat complete", "/v1/chat/completions", `{"model":"p/m","messages":[{"role":"user","content":"hi"}]}`,
			[]llm.Chunk{{Raw: []byte(`{"id":"c","object":"chat.completion","choices":[]}`), Complete: true}}},
		{"responses stream", "/v1/responses", `{"model":"p/m","stream":true,"input":"hi"}`, structuredChunks},
		{"responses whole", "/v1/responses", `{"model":"p/m","input":"hi"}`, structuredChunks},
		{"messages stream", "/v1/messages", `{"model":"p/m","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, structuredChunks},
		{"messages whole", "/v1/messages", `{"model":"p/m","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`, structuredChunks},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := &script{chunks: append([]llm.Chunk(nil), tc.chunks...)}
			s := New(Options{Gateway: stubGateway{sc}, Logger: zerolog.Nop()})
			w := &closeWatcher{ResponseRecorder: httptest.NewRecorder(), st: sc}
			s.ServeHTTP(w, httptest.NewRequest("POST", tc.path, strings.NewReader(tc.body)))
			if w.Code != 200 || w.writes == 0 {
				t.Fatalf("answered %d with %d writes: %s", w.Code, w.writes, w.Body.String())
			}
			if w.lastWasOpen {
				t.Errorf("the answer's last write came before the stream was closed: %q", w.Body.String())
			}
		})
	}
}
