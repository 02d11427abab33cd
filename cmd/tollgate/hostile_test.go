package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/providers/sse"
)

// Attacks on the gateway's limits, each against the gateway as the binary serves it
// (app.Server on a loopback listener), from raw sockets, with the hostile backend of hostile_backend_test.go.
// Every limit is short here so the package stays fast; each attack asserts its bounded
// outcome, the log line it leaves, and that the gateway is idle afterwards.

const shortLimit = 300 * time.Millisecond

const hostileLimits = `limits:
  body_timeout: 300ms
  header_timeout: 300ms
  idle_timeout: 300ms
  max_header_bytes: 4096
  max_event_bytes: 1048576
`

// cliOffsets place the CLI's key so that 0, 2, 6, half, all but 5 and all of it fall before
// the message's cut (see hostileConfig).
var cliOffsets = []int{1, 3, 7, 20, 35, 42, 43}

type hostile struct {
	*gateway
	addr    string
	logs    *syncBuffer
	backend *hostileBackend
}

func startHostile(t *testing.T, limits string) *hostile {
	t.Helper()
	b := newHostileBackend(t)
	logs := &syncBuffer{}
	g := serveGateway(t, hostileConfig(t, b.URL, cliOffsets, limits), nil, zerolog.New(logs).Level(zerolog.TraceLevel))
	return &hostile{gateway: g, addr: strings.TrimPrefix(g.URL, "http://"), logs: logs, backend: b}
}

// dial opens a raw connection to the gateway; every read and write is bounded.
func (h *hostile) dial(t *testing.T) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

// waitLog polls the gateway's log until a line holds every part.
func (h *hostile) waitLog(t *testing.T, parts ...string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		for _, line := range strings.Split(h.logs.String(), "\n") {
			all := true
			for _, p := range parts {
				all = all && strings.Contains(line, p)
			}
			if all {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line with all of %q", parts)
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
}

// chatRequest is a raw chat request for model with content as the user's message.
func chatRequest(id, model, content string, stream bool) string {
	body := fmt.Sprintf(`{"model":%q,"stream":%v,"messages":[{"role":"user","content":%q}]}`, model, stream, content)
	return fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nX-Request-Id: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		id, len(body), body)
}

// readAnswers reads every answer the gateway sends on c until it closes c.
func readAnswers(t *testing.T, c net.Conn) []*http.Response {
	t.Helper()
	br := bufio.NewReader(c)
	var out []*http.Response
	for {
		resp, err := http.ReadResponse(br, nil)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the gateway neither answered nor closed the connection after %d answers: %v", len(out), err)
		}
		if err != nil {
			return out // closed (EOF or a reset once the answers were out)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body = io.NopCloser(strings.NewReader(string(b)))
		out = append(out, resp)
	}
}

// answer sends raw on a new connection and reads the one answer (the connection stays
// open: keep-alive, until idle_timeout).
func (h *hostile) answer(t *testing.T, raw string) *http.Response {
	t.Helper()
	c := h.dial(t)
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	return resp
}

// closed reads c until the gateway closes it, and returns how long that took and what it
// sent first.
func closed(t *testing.T, c net.Conn, since time.Time) (time.Duration, string) {
	t.Helper()
	b, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the gateway did not close the connection (read %q)", b)
	}
	return time.Since(since), string(b)
}

func errCode(t *testing.T, body []byte) string {
	t.Helper()
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("not SPEC §4 JSON: %q", body)
	}
	return e.Error.Code
}

// readEvents reads an SSE answer to its end.
func readEvents(t *testing.T, body io.Reader) []string {
	t.Helper()
	r := sse.NewReader(body)
	var out []string
	for {
		ev, err := r.Next()
		if err != nil {
			return out
		}
		out = append(out, string(ev.Data))
	}
}

func TestHostileClientsAndBackends(t *testing.T) {
	h := startHostile(t, hostileLimits)
	t.Run("endless SSE event", func(t *testing.T) { endlessEvent(t, h) })
	t.Run("truncated answers", func(t *testing.T) { truncatedAnswers(t, h) })
	t.Run("no key fragment", func(t *testing.T) { noKeyFragment(t, h) })
	t.Run("slow body", func(t *testing.T) { slowBody(t, h) })
	t.Run("slow headers", func(t *testing.T) { slowHeaders(t, h) })
	t.Run("idle keep-alive", func(t *testing.T) { idleKeepAlive(t, h) })
	t.Run("header floods", func(t *testing.T) { headerFloods(t, h) })
	t.Run("request smuggling", func(t *testing.T) { smuggling(t, h) })
}

// heapMetric is the bytes of live and not yet swept heap objects.
const heapMetric = "/memory/classes/heap/objects:bytes"

// sampleHeap reads this process's live heap every millisecond until stop is closed and
// sends the highest value seen. The heap, not RSS: the gateway runs in this process, and RSS
// counts the race detector's shadow memory and never shrinks, so one attack's garbage would
// spill into the next one's figure; the heap is exactly what an event buffer without bound
// grows.
func sampleHeap(stop <-chan struct{}) <-chan uint64 {
	out := make(chan uint64, 1)
	go func() { // exits when stop is closed
		s := []metrics.Sample{{Name: heapMetric}}
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		var peak uint64
		for {
			metrics.Read(s)
			peak = max(peak, s[0].Value.Uint64())
			select {
			case <-stop:
				out <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return out
}

// endlessEvent: a backend sends one chunk, then data lines that never end their event. The
// gateway reads max_event_bytes (1 MiB here) of it, ends the stream with one error event and
// hangs up on the backend; its heap never grows by more than a small multiple of the limit,
// where an unbounded reader would hold all 256 MiB the backend is ready to send.
func endlessEvent(t *testing.T, h *hostile) {
	const bound = 48 << 20
	runtime.GC()
	base := heapNow()
	stop := make(chan struct{})
	peak := sampleHeap(stop)
	c := h.dial(t)
	if _, err := io.WriteString(c, chatRequest("endless-1", "hostile/endless", "go", true)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("answer %v %v", resp, err)
	}
	events := readEvents(t, resp.Body)
	close(stop)
	grew := int64(<-peak) - int64(base)
	if grew > bound {
		t.Fatalf("the heap grew by %d MiB with an endless event, bound %d MiB", grew>>20, bound>>20)
	}
	if len(events) != 2 || !strings.Contains(events[0], "a first chunk") || errCode(t, []byte(events[1])) != "upstream_error" ||
		!strings.Contains(events[1], "max_event_bytes") {
		t.Fatalf("events %.200q, want the first chunk and one upstream_error event naming max_event_bytes", events)
	}
	select {
	case sent := <-h.backend.sent:
		if sent >= endlessBytes {
			t.Fatalf("the gateway read all %d bytes of the endless event", sent)
		}
		t.Logf("the backend sent %d MiB before the gateway hung up; the heap grew by %d KiB at most", sent>>20, grew>>10)
	case <-time.After(5 * time.Second):
		t.Fatal("the backend is still sending: the gateway did not hang up")
	}
	h.waitLog(t, `"request_id":"endless-1"`, `"code":"upstream_error"`)
	h.waitIdle(t)
}

func heapNow() uint64 {
	s := []metrics.Sample{{Name: heapMetric}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// truncatedAnswers: a backend of each family starts an answer and closes cleanly without its
// end marker. A stream ends with one upstream_truncated error event and no [DONE]; a whole
// answer is a 502 upstream_truncated; the log line says upstream_truncated.
func truncatedAnswers(t *testing.T, h *hostile) {
	for _, p := range []string{"hostile", "hostile-an", "hostile-ge"} {
		for _, stream := range []bool{true, false} {
			id := fmt.Sprintf("trunc-%s-%v", p, stream)
			resp := h.answer(t, chatRequest(id, p+"/truncated", "go", stream))
			if !stream {
				b, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != http.StatusBadGateway || errCode(t, b) != "upstream_truncated" {
					t.Fatalf("%s: %d %s, want 502 upstream_truncated", id, resp.StatusCode, b)
				}
			} else {
				events := readEvents(t, resp.Body)
				last := events[len(events)-1]
				if resp.StatusCode != 200 || len(events) < 2 || errCode(t, []byte(last)) != "upstream_truncated" ||
					strings.Contains(strings.Join(events, ""), "[DONE]") || !strings.Contains(strings.Join(events, ""), "The answer") {
					t.Fatalf("%s: %d %q, want the chunks, then one upstream_truncated event, no [DONE]", id, resp.StatusCode, events)
				}
			}
			h.waitLog(t, `"request_id":"`+id+`"`, `"code":"upstream_truncated"`, `"status":502`)
		}
	}
	h.waitIdle(t)
}
