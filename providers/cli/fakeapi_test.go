package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeAPI is a minimal OpenAI Responses + Anthropic Messages streaming server for the
// integration tests with the real CLIs: enough of each wire format for Codex and Claude Code
// to answer (PROTOCOLS §12). Each answer streams words, pausing delay between them; with
// slow set it streams 10,000 words, long enough to be cancelled mid-answer.
type fakeAPI struct {
	*httptest.Server
	words []string
	delay time.Duration
	slow  bool

	streaming chan struct{} // gets a value when an answer starts streaming
	mu        sync.Mutex
	gone      int // streamed answers whose client hung up
}

func newFakeAPI(t *testing.T, words []string, delay time.Duration, slow bool) *fakeAPI {
	f := &fakeAPI{words: words, delay: delay, slow: slow, streaming: make(chan struct{}, 16)}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeAPI) hungUp() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gone
}

func (f *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Stream bool `json:"stream"`
	}
	_ = json.Unmarshal(body, &req)
	switch {
	case r.URL.Path == "/v1/responses":
		f.stream(w, r, responsesEvents)
	case r.URL.Path == "/v1/messages" && req.Stream:
		f.stream(w, r, messagesEvents)
	case r.URL.Path == "/v1/messages":
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"msg_0","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`)
	default:
		http.NotFound(w, r)
	}
}

// wireEvents writes one wire format: start, one delta per word, end.
type wireEvents struct {
	start func(emit func(string, string))
	delta func(emit func(string, string), word string)
	end   func(emit func(string, string), text string)
}

func (f *fakeAPI) stream(w http.ResponseWriter, r *http.Request, ev wireEvents) {
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	emit := func(name, data string) {
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data)
		fl.Flush()
	}
	ev.start(emit)
	select {
	case f.streaming <- struct{}{}:
	default:
	}
	words := f.words
	if f.slow {
		words = make([]string, 10000)
		for i := range words {
			words[i] = fmt.Sprintf(" w%d", i)
		}
	}
	var text strings.Builder
	for _, word := range words {
		ev.delta(emit, word)
		text.WriteString(word)
		t := time.NewTimer(f.delay)
		select {
		case <-r.Context().Done():
			t.Stop()
			f.mu.Lock()
			f.gone++
			f.mu.Unlock()
			return
		case <-t.C:
		}
	}
	ev.end(emit, text.String())
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

var responsesEvents = wireEvents{
	start: func(emit func(string, string)) {
		emit("response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[]}}`)
		emit("response.output_item.added", `{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"message","id":"msg_1","role":"assistant","content":[]}}`)
	},
	delta: func(emit func(string, string), word string) {
		emit("response.output_text.delta", `{"type":"response.output_text.delta","sequence_number":2,"item_id":"msg_1","output_index":0,"content_index":0,"delta":`+jsonString(word)+`}`)
	},
	end: func(emit func(string, string), text string) {
		emit("response.output_item.done", `{"type":"response.output_item.done","sequence_number":3,"output_index":0,"item":{"type":"message","id":"msg_1","role":"assistant","content":[{"type":"output_text","text":`+jsonString(text)+`}]}}`)
		emit("response.completed", `{"type":"response.completed","sequence_number":4,"response":{"id":"resp_1","status":"completed","usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":0},"output_tokens":5,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":15}}}`)
	},
}

var messagesEvents = wireEvents{
	start: func(emit func(string, string)) {
		emit("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"usage":{"input_tokens":10,"output_tokens":1}}}`)
		emit("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
	},
	delta: func(emit func(string, string), word string) {
		emit("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`+jsonString(word)+`}}`)
	},
	end: func(emit func(string, string), text string) {
		emit("content_block_stop", `{"type":"content_block_stop","index":0}`)
		emit("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":5}}`)
		emit("message_stop", `{"type":"message_stop"}`)
	},
}
