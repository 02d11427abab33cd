package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The hostile backend's keys: one per provider, long and random-looking like real ones, so
// that a fragment of 6 characters is evidence of a leak and not a coincidence.
var hostileKeys = map[string]string{
	"hostile":    "sk-proj-hQ7vZx2LmA9tKp4WcR8nYb3DsF6gJ1eU0iOq5",
	"hostile-an": "sk-ant-api03-Rk2Wm9XqTz4Lp7Vb1Ny8Hc3Js6Dg0Fa5Ue",
	"hostile-ge": "AIzaSyQ8mT3vK9pW2xL7rN4bH6cJ1dF5gZ0aYeU",
	"hostile-cl": "sk-cli-Vn5Qw8Kr2Tm7Xp3Lz9Bc4Hj1Df6Gs0Ya",
}

// endlessBytes is how much the endless-event backend sends at most: far above the gateway's
// event limit in these tests, so an unbounded reader would hold it all.
const endlessBytes = 256 << 20

// hostileBackend misbehaves as the model asked for says:
//
//	endless    one chunk, then one SSE event that never ends (data lines, never a blank line)
//	truncated  two chunks, then a clean close: no finish reason, no [DONE] (or message_stop)
//	cut        a 502 whose HTML body quotes the key after as many dots as the prompt's
//	           "offset=N" says, so the key straddles the adapter's cut at every offset
//
// It speaks each family's paths (OpenAI /v1, Anthropic /v1/messages, Gemini /v1beta). The
// endless sender stops when the gateway closes the connection; sent reports how far it got.
type hostileBackend struct {
	*httptest.Server
	sent chan int64 // bytes of the endless event sent, one value per endless call
}

var offsetRE = regexp.MustCompile(`offset=(\d+)`)

func newHostileBackend(t *testing.T) *hostileBackend {
	b := &hostileBackend{sent: make(chan int64, 4)}
	b.Server = httptest.NewServer(http.HandlerFunc(b.serve))
	t.Cleanup(b.Close)
	return b
}

func (b *hostileBackend) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	switch {
	case strings.HasSuffix(r.URL.Path, "/models"):
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"data":[],"models":[]}`)
		return
	}
	family := "openai"
	switch {
	case strings.HasSuffix(r.URL.Path, "/messages"):
		family = "anthropic"
	case strings.Contains(r.URL.Path, "/v1beta/"):
		family = "gemini"
	}
	target := r.URL.Path + " " + string(body)
	switch {
	case strings.Contains(target, "endless"):
		b.endless(w)
	case strings.Contains(target, "truncated"):
		stream := strings.Contains(string(body), `"stream":true`) || strings.Contains(r.URL.Path, "streamGenerateContent")
		truncatedAnswer(w, family, stream)
	case strings.Contains(target, "cut"):
		offset := 0
		if m := offsetRE.FindStringSubmatch(string(body)); m != nil {
			offset, _ = strconv.Atoi(m[1])
		}
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		fmt.Fprintf(w, "<p>%s%s is not allowed here</p>", strings.Repeat(".", offset), credential(r))
	default:
		http.Error(w, "unknown hostile mode", http.StatusNotFound)
	}
}

// credential is the key the gateway sent, in whichever header the family uses.
func credential(r *http.Request) string {
	for _, h := range []string{"X-Api-Key", "X-Goog-Api-Key"} {
		if v := r.Header.Get(h); v != "" {
			return v
		}
	}
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
}

// endless sends a first chunk, then data lines of one event until the gateway hangs up or
// endlessBytes have gone out.
func (b *hostileBackend) endless(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprintf(w, "data: %s\n\n", chunkJSON("a first chunk "))
	w.(http.Flusher).Flush()
	line := []byte("data: " + strings.Repeat("x", 64<<10-7) + "\n")
	var sent int64
	for sent < endlessBytes {
		n, err := w.Write(line)
		sent += int64(n)
		if err != nil {
			break
		}
	}
	b.sent <- sent
}

// truncatedAnswer starts an answer in the family's format, streamed or whole, and closes it
// cleanly halfway.
func truncatedAnswer(w http.ResponseWriter, family string, stream bool) {
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		switch family {
		case "anthropic":
			fmt.Fprint(w, `{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"The answer is`)
		case "gemini":
			fmt.Fprint(w, `{"candidates":[{"content":{"parts":[{"text":"The answer is`)
		default:
			fmt.Fprint(w, `{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"The answer is`)
		}
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	switch family {
	case "anthropic":
		fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"truncated\",\"usage\":{\"input_tokens\":1,\"output_tokens\":0}}}\n\n")
		fmt.Fprint(w, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
		fmt.Fprint(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"The answer is\"}}\n\n")
	case "gemini":
		fmt.Fprint(w, "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"The answer is\"}],\"role\":\"model\"},\"index\":0}]}\n\n")
	default:
		fmt.Fprintf(w, "data: %s\n\n", chunkJSON("The answer"))
		fmt.Fprintf(w, "data: %s\n\n", chunkJSON(" is"))
	}
}

// hostileConfig points one provider of each family, and CLI providers whose stderr quotes a
// key at the given offsets against the 600-byte cut, at the backend, with short limits.
func hostileConfig(t *testing.T, backend string, cliOffsets []int, limits string) string {
	t.Helper()
	replay, err := filepath.Abs("../../testdata/cli/bin/replay")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString(limits)
	b.WriteString("providers:\n")
	for _, p := range []struct{ name, kind, base string }{
		{"hostile", "openai", backend + "/v1"}, {"hostile-an", "anthropic", backend}, {"hostile-ge", "gemini", backend + "/v1beta"},
	} {
		fmt.Fprintf(&b, "  - name: %s\n    kind: %s\n    base_url: %s\n    keys: [%q]\n    models: [{id: endless}, {id: truncated}, {id: cut}]\n%s",
			p.name, p.kind, p.base, hostileKeys[p.name], noResilience)
	}
	key := hostileKeys["hostile-cl"]
	for _, off := range cliOffsets {
		// One line of stderr, the key ending off bytes before the message's 600-byte cut.
		stderr := "error: the backend refused " + key + " " + strings.Repeat("z", 600-off)
		env, _ := json.Marshal(map[string]string{"OPENAI_API_KEY": key, "FAKE_CLI_STDERR": stderr, "FAKE_CLI_EXIT": "1"})
		fmt.Fprintf(&b, "  - name: cli-%d\n    kind: codex-cli\n    command: %q\n    env: %s\n    models: [{id: m}]\n%s", off, replay, env, noRetries)
	}
	return b.String()
}
