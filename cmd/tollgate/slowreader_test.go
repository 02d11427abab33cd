package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// A client that stops reading must not keep its lane: the lane comes back
// when the backend has stopped, whatever the client's socket does, and a write that makes no
// progress for write_timeout ends the connection.

// firehose streams OpenAI chunks as fast as the gateway reads them until the gateway hangs
// up, when the prompt says "flood"; otherwise it answers with a few chunks and [DONE]. Under
// /silent/ it sends one chunk and then nothing until the gateway hangs up.
type firehose struct {
	*httptest.Server
	gone atomic.Int32 // calls whose client (the gateway) went away
	// When the last flood began and the last other call arrived, in Unix nanoseconds: the
	// lane's hand-back is timed at the backend, where a loaded machine adds least.
	floodAt, otherAt atomic.Int64
}

// since is how long after the last flood began the instant at (Unix nanoseconds) is.
func (f *firehose) since(at int64) time.Duration { return time.Duration(at - f.floodAt.Load()) }

func newFirehose(t *testing.T) *firehose {
	f := &firehose{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.HasSuffix(r.URL.Path, "/models") {
			_, _ = io.WriteString(w, `{"data":[]}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		if strings.HasPrefix(r.URL.Path, "/silent/") { // one chunk, then nothing until hung up
			_, _ = io.WriteString(w, "data: "+chunkJSON("hi")+"\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			f.gone.Add(1)
			return
		}
		chunk := "data: " + chunkJSON(strings.Repeat("flood ", 200)) + "\n\n"
		if !strings.Contains(string(body), "flood") {
			f.otherAt.Store(time.Now().UnixNano())
			for range 3 {
				_, _ = io.WriteString(w, "data: "+chunkJSON("hi")+"\n\n")
			}
			_, _ = io.WriteString(w, "data: "+finishJSON()+"\n\ndata: [DONE]\n\n")
			return
		}
		f.floodAt.Store(time.Now().UnixNano())
		for {
			if _, err := io.WriteString(w, chunk); err != nil {
				f.gone.Add(1)
				return
			}
			w.(http.Flusher).Flush()
			if r.Context().Err() != nil {
				f.gone.Add(1)
				return
			}
		}
	}))
	t.Cleanup(f.Close)
	return f
}

func finishJSON() string {
	return `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`
}

func TestNonReaderGivesItsLaneBack(t *testing.T) {
	// How late past its timeout a lane may come back. Without the fix it comes back only when
	// the other timeout (a minute) or the client ends the call, so a bound this far below a
	// minute still tells the two apart; a tighter one failed on a machine loaded with other
	// test runs, where filling the socket buffers alone took seconds.
	const slack = 10 * time.Second
	f := newFirehose(t)
	start := func(t *testing.T, runTimeout, writeTimeout time.Duration) (*gateway, string) {
		g := serveGateway(t, fmt.Sprintf(`
limits: {write_timeout: %s}
providers:
  - {name: hose, kind: openai, base_url: %s/v1, keys: [k], lanes: 1, run_timeout: %s, queue_timeout: 30s, models: [{id: m}]}
  - {name: pipe, kind: openai, base_url: %[2]s/silent/v1, keys: [k], lanes: 1, run_timeout: %[3]s, queue_timeout: 30s, models: [{id: m}]}
`, writeTimeout, f.URL, runTimeout), nil, testLog(t))
		return g, strings.TrimPrefix(g.URL, "http://")
	}
	nonReader := func(t *testing.T, addr, id, content string) net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		if _, err := io.WriteString(c, chatRequest(id, "hose/m", content, true)); err != nil {
			t.Fatal(err)
		}
		return c
	}

	t.Run("an answer that fits in the socket buffers", func(t *testing.T) {
		g, addr := start(t, time.Minute, time.Minute)
		nonReader(t, addr, "small-1", "small")
		g.waitIdle(t) // the backend ended, so did the call: nobody had to read it
	})

	t.Run("lane back at run_timeout while the client reads nothing", func(t *testing.T) {
		// Long enough for the non-reader's socket buffers to fill: the handler is blocked
		// writing when the run_timeout stops the backend.
		const runTimeout = 3 * time.Second
		g, addr := start(t, runTimeout, time.Minute)
		nonReader(t, addr, "nonreader-1", "flood me")
		waitRunning(t, g.URL, 1)
		// A normal client of the same one-lane provider waits for the lane and gets it once
		// the non-reader's backend is stopped, while the non-reader is still connected.
		normal := postAsync(context.Background(), g.URL, "hose/m", "", true)
		if a := await(t, normal); a.status != 200 {
			t.Errorf("the normal client: %d %.200s", a.status, a.body)
		}
		// The normal call reached the backend once the lane was back.
		if d := f.since(f.otherAt.Load()); d > runTimeout+slack {
			t.Errorf("the lane came back %v after the non-reader's call began: want within run_timeout (%v) + %v", d, runTimeout, slack)
		}
		if f.gone.Load() == 0 {
			t.Error("the backend did not see its call stopped when the lane came back")
		}
		g.waitIdle(t)
	})

	t.Run("write_timeout ends a connection whose client reads nothing", func(t *testing.T) {
		const writeTimeout = time.Second
		g, addr := start(t, time.Minute, writeTimeout)
		c := nonReader(t, addr, "nonreader-2", "flood me")
		// The answer never ends; once the socket buffers are full a write makes no progress,
		// and after write_timeout the gateway closes the connection and frees the lane.
		waitRunning(t, g.URL, 1)
		waitRunning(t, g.URL, 0)
		if d := f.since(time.Now().UnixNano()); d > writeTimeout+slack {
			t.Errorf("the lane came back %v after the call began: want within write_timeout (%v) + %v (the socket buffers fill first)", d, writeTimeout, slack)
		}
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err := io.Copy(io.Discard, c) // what was buffered, then the end
		var ne net.Error
		if asNetError(err, &ne) && ne.Timeout() {
			t.Fatalf("the connection is still open after write_timeout: %v", err)
		}
		g.waitIdle(t)
	})

	t.Run("write_timeout stops every member of a batch whose client reads nothing", func(t *testing.T) {
		// One member floods, the other is silent: the silent one's backend must be stopped
		// too, though nothing of it waits to be written.
		const writeTimeout = time.Second
		g, addr := start(t, time.Minute, writeTimeout)
		gone := f.gone.Load()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		body := `{"models":["hose/m","pipe/m"],"stream":true,"messages":[{"role":"user","content":"flood me"}]}`
		if _, err := fmt.Fprintf(c, "POST /v1/batch/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body); err != nil {
			t.Fatal(err)
		}
		waitRunning(t, g.URL, 2)
		waitRunning(t, g.URL, 0)
		if d := f.since(time.Now().UnixNano()); d > writeTimeout+slack {
			t.Errorf("the lanes came back %v after the flooding member began: want within write_timeout (%v) + %v (the socket buffers fill first)", d, writeTimeout, slack)
		}
		if n := f.gone.Load() - gone; n != 2 {
			t.Errorf("%d backend calls saw the gateway hang up, want both members'", n)
		}
		g.waitIdle(t)
	})
}

func asNetError(err error, target *net.Error) bool {
	ne, ok := err.(net.Error)
	if ok {
		*target = ne
	}
	return ok
}

func testLog(t *testing.T) zerolog.Logger {
	if os.Getenv("TOLLGATE_TEST_LOG") == "" {
		return zerolog.Nop()
	}
	return zerolog.New(zerolog.NewTestWriter(t)).With().Timestamp().Logger()
}
