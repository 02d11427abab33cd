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
// connected. A client that hangs up before the grace ends is still a client disconnect.
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
	a, err := app.New(context.Background(), cfg, app.Options{Logger: zerolog.New(logs)})
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
		waitLine(t, logs, tc.id) // its handler returns once its write fails on the closed connection
		line := requestLine(logs.String(), tc.id)
		if !strings.Contains(line, tc.want) {
			t.Errorf("%s's log line lacks %s: %s", tc.id, tc.want, line)
		}
		if want := tc.id == "leaver"; strings.Contains(line, `"client_disconnect":true`) != want {
			t.Errorf("%s's log line: client_disconnect should be %v: %s", tc.id, want, line)
		}
	}
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
