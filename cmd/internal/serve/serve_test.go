package serve

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// logBuffer is a log sink the server's goroutines write while the test reads it.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitFor polls the log until it holds every part, or fails the test after a deadline.
func (l *logBuffer) waitFor(t *testing.T, parts ...string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		s := l.String()
		missing := ""
		for _, p := range parts {
			if !strings.Contains(s, p) {
				missing = p
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %q in:\n%s", missing, s)
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
}

// start serves a handler answering "ok" with the limits on a loopback listener.
func start(t *testing.T, l Limits) (string, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	srv := New(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "ok")
	}), l, zerolog.New(logs).Level(zerolog.DebugLevel))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }() // exits when the cleanup closes the server
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String(), logs
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	return c
}

const get = "GET / HTTP/1.1\r\nHost: gw\r\n\r\n"

// ask sends one request on c and checks the answer.
func ask(t *testing.T, c net.Conn, br *bufio.Reader) {
	t.Helper()
	if _, err := io.WriteString(c, get); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != "ok" {
		t.Fatalf("answer %d %q", resp.StatusCode, b)
	}
}

// closedByServer reads c until the server closes it and returns what it sent first; a read
// that times out fails the test.
func closedByServer(t *testing.T, c net.Conn) string {
	t.Helper()
	b, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server did not close the connection (read %q)", b)
	}
	return string(b)
}

func TestPerClientCap(t *testing.T) {
	addr, logs := start(t, Limits{MaxConnsPerClient: 2})
	a, b := dial(t, addr), dial(t, addr)
	ask(t, a, bufio.NewReader(a)) // both accepted and served: they hold the client's two places
	ask(t, b, bufio.NewReader(b))
	if got := closedByServer(t, dial(t, addr)); got != "" {
		t.Fatalf("a third connection got %q, want it closed unanswered", got)
	}
	logs.waitFor(t, "max_conns_per_client")
	_ = a.Close()
	// Once the server has seen a close, its place is free again.
	deadline := time.Now().Add(3 * time.Second)
	for {
		c := dial(t, addr)
		if _, err := io.WriteString(c, get); err == nil {
			if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil && resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the place of a closed connection was never given back")
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
}

// TestCloseReasonsAreLogged: every limit Go's server enforces by closing a connection leaves
// a line saying which.
func TestCloseReasonsAreLogged(t *testing.T) {
	const limit = 200 * time.Millisecond
	addr, logs := start(t, Limits{HeaderTimeout: limit, IdleTimeout: limit, MaxHeaderBytes: 1024})

	silent := dial(t, addr) // never sends a byte
	partial := dial(t, addr)
	_, _ = io.WriteString(partial, "GET / HTTP/1.1\r\nHost: gw\r\nX-Slow: ") // and stops
	idle := dial(t, addr)
	ask(t, idle, bufio.NewReader(idle)) // then sends nothing more
	flood := dial(t, addr)
	_, _ = io.WriteString(flood, "GET / HTTP/1.1\r\nHost: gw\r\nX-Flood: "+strings.Repeat("f", 8<<10)+"\r\n\r\n")

	for name, c := range map[string]net.Conn{"silent": silent, "partial": partial, "idle": idle} {
		if got := closedByServer(t, c); got != "" {
			t.Errorf("%s: the server sent %q before closing", name, got)
		}
	}
	if got := closedByServer(t, flood); !strings.HasPrefix(got, "HTTP/1.1 431") {
		t.Errorf("header flood: got %q, want Go's 431", got)
	}
	logs.waitFor(t,
		`"remote":"`+silent.LocalAddr().String()+`","header_timeout"`,
		`"remote":"`+partial.LocalAddr().String()+`","header_timeout"`,
		`"remote":"`+idle.LocalAddr().String()+`","idle_timeout"`,
		`"remote":"`+flood.LocalAddr().String()+`","status":"431 Request Header Fields Too Large"`)
	if s := logs.String(); strings.Contains(s, "ffff") {
		t.Errorf("the log quotes the client's headers: %s", s)
	}
}

// TestConnLogCapsEachLevelApart: a second's flood of debug lines (idle connections closing)
// is capped without dropping the info line that follows it (a late request), and a flood of
// info lines is capped too.
func TestConnLogCapsEachLevelApart(t *testing.T) {
	logs := &logBuffer{}
	log := connLog(zerolog.New(logs).Level(zerolog.TraceLevel))
	for range 3 * connLogBurst {
		log.Debug().Msg("idle")
	}
	log.Info().Msg("late")
	for range 3 * connLogBurst {
		log.Info().Msg("refused")
	}
	out := logs.String()
	if !strings.Contains(out, `"message":"late"`) {
		t.Errorf("the info line after %d debug lines was dropped", 3*connLogBurst)
	}
	// Unless the second turned between two lines, each level kept exactly its burst.
	if idle, info := strings.Count(out, `"idle"`), strings.Count(out, `"level":"info"`); idle > 2*connLogBurst || info > 2*connLogBurst || idle < connLogBurst {
		t.Errorf("%d debug and %d info lines kept, want %d of each", idle, info, connLogBurst)
	}
}
