package openai

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/openai")

// testdataDir is the repository's top-level testdata/openai.
const testdataDir = "../../testdata/openai"

// fixedNow keeps RetryHint's HTTP-date arithmetic stable in goldens.
var fixedNow = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// newTestClient returns a Client of kind for the server at url, with a clock fixed at fixedNow.
func newTestClient(t testing.TB, kind, url string, keys ...string) *Client {
	t.Helper()
	c, err := New(kind, Config{Name: kind + "-test", BaseURL: url, Keys: keys})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	c.now = func() time.Time { return fixedNow }
	return c
}

// readHTTPFixture reads a raw HTTP response ("HTTP/1.1 200 OK", headers, blank line, body).
func readHTTPFixture(t *testing.T, path string) (status int, h http.Header, body []byte) {
	t.Helper()
	f, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(f)), nil)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return resp.StatusCode, resp.Header, body
}

// replayServer answers every request with the fixture, written in small flushed pieces so the
// client sees reads cut anywhere, also inside multi-byte characters.
func replayServer(t *testing.T, status int, h http.Header, body []byte, piece int) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		for k, vs := range h {
			if k == "Content-Length" {
				continue
			}
			w.Header()[k] = vs
		}
		w.WriteHeader(status)
		for b := body; len(b) > 0; {
			n := min(piece, len(b))
			if _, err := w.Write(b[:n]); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			b = b[n:]
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// goldenError is how an error appears in a golden file.
type goldenError struct {
	Kind           string `json:"kind"`
	Message        string `json:"message"`
	Param          string `json:"param,omitempty"`
	UpstreamStatus int    `json:"upstream_status,omitempty"`
	UpstreamCode   string `json:"upstream_code,omitempty"`
	RetryAfterMs   int64  `json:"retry_after_ms,omitempty"`
}

// goldenEvent is one line of a response golden: a chunk, the error that ended the stream, the
// error Open returned, or the end.
type goldenEvent struct {
	OpenError *goldenError `json:"open_error,omitempty"`
	Chunk     *goldenChunk `json:"chunk,omitempty"`
	Error     *goldenError `json:"error,omitempty"`
	EOF       bool         `json:"eof,omitempty"`
}

type goldenChunk struct {
	Raw          json.RawMessage `json:"raw"`
	Complete     bool            `json:"complete,omitempty"`
	UsageOnly    bool            `json:"usage_only,omitempty"`
	FinishReason string          `json:"finish_reason,omitempty"`
	Usage        *goldenUsage    `json:"usage,omitempty"`
}

type goldenUsage struct {
	llm.Usage
	Cached    int `json:"cached_tokens,omitempty"`
	Reasoning int `json:"reasoning_tokens,omitempty"`
}

func toGoldenError(t *testing.T, err error) *goldenError {
	t.Helper()
	var e *llm.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *llm.Error", err, err)
	}
	return &goldenError{
		Kind: e.Kind.String(), Message: e.Message, Param: e.Param, UpstreamStatus: e.UpstreamStatus,
		UpstreamCode: e.UpstreamCode, RetryAfterMs: e.RetryAfter.Milliseconds(),
	}
}

func toGoldenChunk(ch llm.Chunk) *goldenChunk {
	g := &goldenChunk{Raw: ch.Raw, Complete: ch.Complete, UsageOnly: ch.UsageOnly, FinishReason: string(ch.FinishReason)}
	if ch.Usage != nil {
		g.Usage = &goldenUsage{Usage: *ch.Usage, Cached: ch.Usage.CachedTokens, Reasoning: ch.Usage.ReasoningTokens}
	}
	return g
}

// checkGolden compares got with the golden file, or rewrites it under -update.
func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("missing golden (run with -update): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// encodeLines renders values as JSON lines, without HTML escaping.
func encodeLines(t *testing.T, vs []goldenEvent) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for _, v := range vs {
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

func caseFiles(t *testing.T, pattern string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testdataDir, "*", pattern))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no test cases match %s", pattern)
	}
	return files
}

func trimExt(path, ext string) string { return strings.TrimSuffix(path, ext) }

func errorsAs(err error, target any) bool { return errors.As(err, target) }
