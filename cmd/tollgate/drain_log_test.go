package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/cmd/internal/app"
	"github.com/tollgate/tollgate/cmd/internal/config"
)

// TestDrainedNonReaderIsLoggedDrained: a streaming client that reads nothing keeps its
// handler blocked writing; at the end of drain_grace the drain stops its call, and its
// connection is closed once the final events had their time. Its log line says the drain
// ended it (503 gateway_draining), not that the client left (499): the client is still
// connected. A client that hangs up before the grace ends is still a client disconnect. Both
// lines are written when drain returns, as the process exits then.
func TestDrainedNonReaderIsLoggedDrained(t *testing.T) {
	f := newFirehose(t)
	cfg, err := config.Parse("test.yaml", []byte(fmt.Sprintf(`
limits: {write_timeout: 1m}
providers:
  - {name: hose, kind: openai, base_url: %s/v1, keys: [k], lanes: 4, run_timeout: 1m, models: [{id: m}]}
`, f.URL)), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	// The non-reader's line reaches the log a moment after its handler writes it, as through
	// a slow pipe: drain must still return only once it is written.
	sink := slowSink{w: logs, match: `"request_id":"nonreader"`, delay: 300 * time.Millisecond}
	a, err := app.New(context.Background(), cfg, app.Options{Logger: zerolog.New(sink), StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := a.Server()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }() // exits when the drain shuts the server down
	url := "http://" + ln.Addr().String()

	nonReader, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nonReader.Close()
	_ = nonReader.(*net.TCPConn).SetReadBuffer(4096) // its buffers fill at once
	if _, err := io.WriteString(nonReader, chatRequest("nonreader", "hose/m", "flood me", true)); err != nil {
		t.Fatal(err)
	}
	leaver, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(leaver, chatRequest("leaver", "hose/m", "flood me", true)); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, url, 2)
	_ = leaver.Close() // hangs up while its call runs: a client disconnect
	waitLine(t, logs, "leaver")

	// drain_grace long enough for the non-reader's buffers to fill: its handler is blocked
	// writing when the drain stops its call.
	if err := drain(a, srv, 0, 2*time.Second, zerolog.New(logs)); err != nil {
		t.Errorf("drain: %v", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("serve: %v", err)
	}
	for _, tc := range []struct {
		id, want string
	}{
		{"nonreader", `"status":503,"code":"gateway_draining"`},
		{"leaver", `"status":499,`},
	} {
		// Already written when drain returns: the process exits then. The non-reader's
		// handler returns once its write fails on the connection the drain closed.
		line := requestLine(logs.String(), tc.id)
		if line == "" {
			t.Errorf("no log line for %s when drain returned:\n%s", tc.id, logs.String())
			continue
		}
		if !strings.Contains(line, tc.want) {
			t.Errorf("%s's log line lacks %s: %s", tc.id, tc.want, line)
		}
		if want := tc.id == "leaver"; strings.Contains(line, `"client_disconnect":true`) != want {
			t.Errorf("%s's log line: client_disconnect should be %v: %s", tc.id, want, line)
		}
	}
}

// slowSink writes to w, each line that contains match after delay: a log sink slower than
// the handler that writes to it.
type slowSink struct {
	w     io.Writer
	match string
	delay time.Duration
}

func (s slowSink) Write(p []byte) (int, error) {
	if strings.Contains(string(p), s.match) {
		time.Sleep(s.delay) // a slow sink, not a synchronisation: nothing waits on it
	}
	return s.w.Write(p)
}

// waitLine polls logs until request id's log line is in.
func waitLine(t *testing.T, logs *syncBuffer, id string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for requestLine(logs.String(), id) == "" {
		if time.Now().After(deadline) {
			t.Fatalf("no log line for %s after 10s:\n%s", id, logs.String())
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
}
