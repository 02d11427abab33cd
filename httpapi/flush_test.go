package httpapi

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/providers/llm"
)

// flushCounter records, for every flush, how many events had been written by then.
type flushCounter struct {
	*httptest.ResponseRecorder
	flushes []int
}

func (f *flushCounter) Flush() {
	f.flushes = append(f.flushes, strings.Count(f.Body.String(), "\n\n"))
	f.ResponseRecorder.Flush()
}

// hinted is a script whose chunks say whether the next one has already arrived.
type hinted struct {
	script
	ready []bool // ready[i]: once i chunks are returned, is the next one buffered?
	n     int
}

func (h *hinted) Next() (llm.Chunk, error) {
	c, err := h.script.Next()
	if err == nil {
		h.n++
	}
	return c, err
}

func (h *hinted) Buffered() bool { return h.n < len(h.ready) && h.ready[h.n] }

// usageOnly is an OpenAI-compatible backend's usage chunk, relayed only to a client that asked
// for it.
var usageOnly = llm.Chunk{Raw: []byte(`{"object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":1}}`),
	UsageOnly: true, Usage: &llm.Usage{PromptTokens: 1}}

func TestFlushOnlyWhenNothingIsBuffered(t *testing.T) {
	raw := func(s string) llm.Chunk {
		return llm.Chunk{Raw: []byte(`{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"` + s + `"}}]}`)}
	}
	cases := []struct {
		name string
		st   llm.Stream
		want []int // events written at each flush
	}{
		// The headers go out before the first chunk arrives; chunks 1 and 2 arrived together,
		// 3 alone; [DONE] is always flushed.
		{"hinted", &hinted{script: script{chunks: []llm.Chunk{raw("a"), raw("b"), raw("c")}}, ready: []bool{false, true, false, false}}, []int{0, 2, 3, 4}},
		// The first chunk arrived with the backend's headers: it carries ours.
		{"first chunk ready", &hinted{script: script{chunks: []llm.Chunk{raw("a"), raw("b"), raw("c")}}, ready: []bool{true, true, false, false}}, []int{2, 3, 4}},
		// Chunk 1 waits for chunk 2, which the client did not ask for (a usage chunk): chunk 1
		// is flushed before the relay waits for chunk 3.
		{"a chunk that writes nothing", &hinted{script: script{chunks: []llm.Chunk{raw("a"), usageOnly, raw("c")}}, ready: []bool{false, true, false, false}}, []int{0, 1, 2, 3}},
		// A stream that cannot tell is flushed at its start and after every event.
		{"no hint", &script{chunks: []llm.Chunk{raw("a"), raw("b"), raw("c")}}, []int{0, 1, 2, 3, 4}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Options{Gateway: stubStreamGateway{tc.st}, Logger: zerolog.Nop()})
			w := &flushCounter{ResponseRecorder: httptest.NewRecorder()}
			req := httptest.NewRequest("POST", "/v1/chat/completions",
				strings.NewReader(`{"model":"p/m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
			s.ServeHTTP(w, req)
			if w.Code != http.StatusOK || !strings.HasSuffix(w.Body.String(), "data: [DONE]\n\n") {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			if len(w.flushes) != len(tc.want) {
				t.Fatalf("flushes after %v events, want %v", w.flushes, tc.want)
			}
			for i := range tc.want {
				if w.flushes[i] != tc.want[i] {
					t.Fatalf("flushes after %v events, want %v", w.flushes, tc.want)
				}
			}
		})
	}
}

// TestFlushPerChunkInEveryFormat: a translated answer's events for one chunk share one flush,
// and chunks that arrived together share one, in every format as in chat.
func TestFlushPerChunkInEveryFormat(t *testing.T) {
	chunks := []llm.Chunk{{Content: "a"}, {Content: "b"}, {Content: "c"}, {FinishReason: llm.FinishStop}}
	ready := []bool{false, true, false, false, false} // chunks 1 and 2 arrived together
	cases := []struct {
		path, body string
		want       []int // events written at each flush
	}{
		// message_start, ping, then a text block: its start and a delta per chunk; the
		// finish writes nothing (no flush); the block's stop, message_delta and message_stop
		// at the end.
		{"/v1/messages", messagesStreamBody, []int{0, 5, 6, 9}},
		// response.created and .in_progress, the message item and its part, then a delta per
		// chunk; the finish writes nothing; at the end the text, the part and the item done,
		// and response.completed.
		{"/v1/responses", responsesStreamBody, []int{0, 6, 7, 11}},
		{chatRoute, chatStreamBody, []int{0, 2, 3, 4, 5}},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			st := &hinted{script: script{chunks: append([]llm.Chunk(nil), chunks...)}, ready: ready}
			s := New(Options{Gateway: stubStreamGateway{st}, Logger: zerolog.Nop()})
			w := &flushCounter{ResponseRecorder: httptest.NewRecorder()}
			s.ServeHTTP(w, httptest.NewRequest("POST", tc.path, strings.NewReader(tc.body)))
			if w.Code != http.StatusOK || fmt.Sprint(w.flushes) != fmt.Sprint(tc.want) {
				t.Fatalf("%d: flushes after %v events, want %v\n%s", w.Code, w.flushes, tc.want, w.Body)
			}
		})
	}
}
