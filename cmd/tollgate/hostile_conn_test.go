package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// noKeyFragment: backends that quote our key in bodies the adapters cut to a snippet (300
// bytes for OpenAI-compatible ones, 200 for Anthropic and Gemini), with the key at every
// offset against the cut, and a CLI that prints it on stderr at offsets against the message's
// 600-byte cut. No piece of any key of 6 or more characters is in any answer or log line.
func noKeyFragment(t *testing.T, h *hostile) {
	var answers strings.Builder
	for _, p := range []struct {
		name string
		cut  int
	}{{"hostile", 300}, {"hostile-an", 200}, {"hostile-ge", 200}} {
		key := hostileKeys[p.name]
		// The body is "<p>" + dots + key + ...: the key straddles the cut for these offsets.
		for off := p.cut - 3 - len(key) - 1; off <= p.cut-3+1; off++ {
			id := fmt.Sprintf("cut-%s-%d", p.name, off)
			resp := h.answer(t, chatRequest(id, p.name+"/cut", fmt.Sprintf("offset=%d", off), false))
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(b), "....") {
				t.Fatalf("%s: %d %s, want a 502 showing the backend's body (else the test would prove nothing)", id, resp.StatusCode, b)
			}
			fmt.Fprintf(&answers, "%v\n%s\n", resp.Header, b)
		}
	}
	for _, off := range cliOffsets {
		resp := h.answer(t, chatRequest(fmt.Sprintf("cli-%d", off), fmt.Sprintf("cli-%d/m", off), "hi", false))
		b, _ := io.ReadAll(resp.Body)
		if !strings.Contains(string(b), "zzzz") {
			t.Fatalf("cli-%d: %s does not show the CLI's stderr: the test would prove nothing", off, b)
		}
		fmt.Fprintf(&answers, "%v\n%s\n", resp.Header, b)
	}
	h.waitIdle(t)
	h.waitLog(t, `"request_id":"cli-43"`) // the last call's line is out: the log is complete
	for name, key := range hostileKeys {
		for i := 0; i+6 <= len(key); i++ {
			frag := key[i : i+6]
			if strings.Contains(answers.String(), frag) {
				t.Errorf("an answer shows %q of %s's key", frag, name)
			}
			if strings.Contains(h.logs.String(), frag) {
				t.Errorf("the log shows %q of %s's key", frag, name)
			}
		}
	}
}

// slowBody: a client sends its headers and then trickles, or stops sending, its body. At
// body_timeout it gets 408 request_timeout and the connection is closed; a chunked body
// (which could never end) is refused at once.
func slowBody(t *testing.T, h *hostile) {
	c := h.dial(t)
	start := time.Now()
	req := chatRequest("slow-body", "hostile/truncated", "hi", false)
	if _, err := io.WriteString(c, req[:len(req)-20]); err != nil { // the body's last bytes never come
		t.Fatal(err)
	}
	resps := readAnswers(t, c)
	took := time.Since(start)
	if len(resps) != 1 || resps[0].StatusCode != http.StatusRequestTimeout || !resps[0].Close {
		t.Fatalf("%d answers, want one 408 with Connection: close", len(resps))
	}
	if b, _ := io.ReadAll(resps[0].Body); errCode(t, b) != "request_timeout" || took < shortLimit {
		t.Fatalf("%s after %v, want request_timeout after body_timeout (%v)", b, took, shortLimit)
	}
	h.waitLog(t, `"request_id":"slow-body"`, `"status":408`, `"code":"request_timeout"`)

	// A chunked body (which might never end) is refused, and the connection closed.
	endless := h.dial(t)
	fmt.Fprint(endless, "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"mod\r\n")
	resps = readAnswers(t, endless)
	if len(resps) != 1 || resps[0].StatusCode != http.StatusBadRequest || !resps[0].Close {
		t.Fatalf("a chunked body: %d answers, want one 400 and the close", len(resps))
	}

	// A route answered without reading its slow body: the server's read of what is left is
	// bounded by body_timeout too.
	unread := h.dial(t)
	start = time.Now()
	fmt.Fprint(unread, "POST /v1/nowhere HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\n{\"a\":")
	resps = readAnswers(t, unread)
	if took := time.Since(start); len(resps) != 1 || resps[0].StatusCode != http.StatusNotFound || took > shortLimit+2*time.Second {
		t.Fatalf("%d answers, closed after %v, want the 404 and the close by body_timeout", len(resps), took)
	}
	h.waitIdle(t)
}

// slowHeaders: a connection that sends nothing, and one that sends half a header and stops,
// are closed at header_timeout, and the log says so.
func slowHeaders(t *testing.T, h *hostile) {
	start := time.Now() // before the dials: the gateway's clock starts at its accept
	silent, partial := h.dial(t), h.dial(t)
	fmt.Fprint(partial, "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nX-Slow: a")
	for name, c := range map[string]net.Conn{"silent": silent, "partial": partial} {
		took, got := closed(t, c, start)
		if got != "" || took < shortLimit {
			t.Errorf("%s: closed after %v with %q, want closed unanswered at header_timeout (%v)", name, took, got, shortLimit)
		}
		h.waitLog(t, `"remote":"`+c.LocalAddr().String()+`"`, "header_timeout")
	}
}

// idleKeepAlive: connections left open after an answer are closed at idle_timeout, all of
// them, and the log says so (for some: connection-level lines are capped at 20 a second).
func idleKeepAlive(t *testing.T, h *hostile) {
	const n = 10
	conns := make([]net.Conn, n)
	start := time.Now()
	for i := range conns {
		conns[i] = h.dial(t)
		fmt.Fprint(conns[i], "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conns[i]), nil)
		if err != nil || resp.StatusCode != 200 || resp.Close {
			t.Fatalf("connection %d: %v %v, want a kept-alive 200", i, resp, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
	}
	for i, c := range conns {
		if took, _ := closed(t, c, start); took < shortLimit {
			t.Fatalf("connection %d closed after %v, before idle_timeout %v", i, took, shortLimit)
		}
	}
	h.waitLog(t, `"remote":"`+conns[n-1].LocalAddr().String()+`"`, "idle_timeout")
}

// headerFloods: headers a little over max_header_bytes get the gateway's 431; a megabyte of
// them gets Go's own 431 before any handler runs. Either way the connection is closed and
// the log has a line; nothing of the headers is quoted in it.
func headerFloods(t *testing.T, h *hostile) {
	over := h.dial(t)
	fmt.Fprint(over, "GET /v1/models HTTP/1.1\r\nHost: localhost\r\nX-Flood: "+strings.Repeat("o", 5000)+"\r\n\r\n")
	resps := readAnswers(t, over)
	if len(resps) != 1 || resps[0].StatusCode != http.StatusRequestHeaderFieldsTooLarge || !resps[0].Close {
		t.Fatalf("%d answers, want one 431 and the close", len(resps))
	}
	if b, _ := io.ReadAll(resps[0].Body); errCode(t, b) != "request_header_too_large" {
		t.Fatalf("answer %s", b)
	}
	h.waitLog(t, `"code":"request_header_too_large"`, `"status":431`)

	flood := h.dial(t)
	go func() { // exits when the flood is written or the gateway has closed the connection
		_, _ = io.WriteString(flood, "GET /v1/models HTTP/1.1\r\nHost: localhost\r\n"+strings.Repeat("X-Flood: "+strings.Repeat("f", 1000)+"\r\n", 1000))
	}()
	if _, got := closed(t, flood, time.Now()); !strings.HasPrefix(got, "HTTP/1.1 431") {
		t.Fatalf("a megabyte of headers got %q, want 431 and the close", got)
	}
	h.waitLog(t, `"remote":"`+flood.LocalAddr().String()+`"`, `"status":"431 Request Header Fields Too Large"`)
	if strings.Contains(h.logs.String(), "ffffffff") || strings.Contains(h.logs.String(), "oooooooo") {
		t.Error("the log quotes the flood")
	}
	h.waitIdle(t)
}

// smuggling: Content-Length and Transfer-Encoding together, a second request hidden where
// the two framings disagree. Exactly one answer, a 400, then the connection closes: the
// hidden request is never served.
func smuggling(t *testing.T, h *hostile) {
	c := h.dial(t)
	fmt.Fprint(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"+
		"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"+
		"GET /admin/state HTTP/1.1\r\nHost: localhost\r\n\r\n")
	resps := readAnswers(t, c)
	if len(resps) != 1 || resps[0].StatusCode != http.StatusBadRequest || !resps[0].Close {
		t.Fatalf("%d answers (first %v), want exactly one 400 and the close", len(resps), resps)
	}
	if b, _ := io.ReadAll(resps[0].Body); errCode(t, b) != "invalid_request" || !strings.Contains(string(b), "Transfer-Encoding") {
		t.Fatalf("answer %s", b)
	}
	h.waitLog(t, `"code":"invalid_request"`, "Transfer-Encoding", `"path":"/v1/chat/completions"`)
}

// TestHostilePerClientCap: a client address that holds max_conns_per_client connections has
// a new one closed unanswered, and logged; once it closes one, it may open another.
func TestHostilePerClientCap(t *testing.T) {
	h := startHostile(t, hostileLimits+"  max_conns_per_client: 3\n")
	var held []net.Conn
	for range 3 {
		c := h.dial(t)
		fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
		if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || resp.StatusCode != 200 {
			t.Fatalf("a connection within the cap: %v %v", resp, err)
		}
		held = append(held, c)
	}
	extra := h.dial(t)
	fmt.Fprint(extra, "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
	if _, got := closed(t, extra, time.Now()); got != "" {
		t.Fatalf("a fourth connection got %q, want it closed unanswered", got)
	}
	h.waitLog(t, `"remote":"`+extra.LocalAddr().String()+`"`, "max_conns_per_client")
	_ = held[0].Close()
	deadline := time.Now().Add(3 * time.Second)
	for {
		c := h.dial(t)
		fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
		if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil && resp.StatusCode == 200 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("a closed connection's place was never given back")
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline: the gateway sees the close soon
	}
}
