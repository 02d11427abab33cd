package upstream_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/providers/anthropic"
	"github.com/tollgate/tollgate/providers/gemini"
	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/openai"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/signals")

const signalsDir = "../../testdata/signals"

// placeholder is {{rfc3339 +30s}} in a fixture: the instant that far after the replay starts.
// It is written with its fraction of a second (real headers are whole seconds; both parse the
// same): a truncated instant would make the wait read up to a second short, and whether it
// rounds to 29 or 30 would depend on when the test ran. HTTP-dates, which cannot carry a
// fraction, are tested against a fixed clock in retry_test.go.
var placeholder = regexp.MustCompile(`\{\{rfc3339 \+([0-9a-z]+)\}\}`)

// TestSignalsGolden replays each recorded backend answer (testdata/signals/KIND_*.http, a raw
// HTTP response) through the adapter of its kind, with key 1 of two chosen, and pins what
// the adapter surfaces: the error kind, the wait hint in whole seconds (rounded up: an
// instant reads a little less than its distance by the time the adapter sees it), the stated
// concurrency, the quota and the key; for a success, the stream's quota. docs/capacity-signals.md says where each shape
// comes from.
func TestSignalsGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(signalsDir, "*.http"))
	if err != nil || len(files) < 10 {
		t.Fatalf("fixtures: %v (%d)", err, len(files))
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".http")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			got := replay(t, name, raw)
			golden := filepath.Join(signalsDir, name+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("%s:\n got: %s\nwant: %s", name, got, want)
			}
		})
	}
}

// replay serves the fixture and returns the adapter's view of it as one JSON line.
func replay(t *testing.T, name string, raw []byte) string {
	t.Helper()
	start := time.Now()
	text := placeholder.ReplaceAllStringFunc(string(raw), func(m string) string {
		d, err := time.ParseDuration(placeholder.FindStringSubmatch(m)[1])
		if err != nil {
			t.Fatalf("placeholder %s: %v", m, err)
		}
		return start.Add(d).UTC().Format(time.RFC3339Nano)
	})
	// Fixtures are written with LF line ends; ReadResponse wants the headers' CRLF.
	head, body, _ := strings.Cut(text, "\n\n")
	resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(strings.ReplaceAll(head, "\n", "\r\n")+"\r\n\r\n")), nil)
	if err != nil {
		t.Fatalf("fixture: %v", err)
	}
	var sawKey string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		sawKey = r.Header.Get("Authorization") + r.Header.Get("X-Api-Key") + r.Header.Get("X-Goog-Api-Key")
		for k, vs := range resp.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(resp.StatusCode)
		io.WriteString(w, body)
	}))
	defer srv.Close()

	backend := adapterFor(t, name, srv.URL)
	req := &llm.Request{Model: "m", Messages: []llm.Message{{Role: "user", Content: llm.Content{Text: "hi"}}}}
	stream, err := backend.OpenWithKey(context.Background(), req, 1)
	if !strings.HasSuffix(sawKey, "key-b") {
		t.Errorf("the call used key %q, want key 1 (key-b)", sawKey)
	}
	out := map[string]any{}
	if err == nil {
		defer stream.Close()
		out["ok"] = true
		if q, ok := stream.(llm.QuotaReporter); ok {
			out["quota"] = quota(q.Quota())
		}
		return line(out)
	}
	e, ok := errors.AsType[*llm.Error](err)
	if !ok {
		t.Fatalf("Open = %v, not an *llm.Error", err)
	}
	out["kind"] = e.Kind.String()
	out["status"] = e.UpstreamStatus
	out["key"] = e.Key
	out["retry_after_s"] = int(math.Ceil(e.RetryAfter.Seconds()))
	out["stated_limit"] = e.StatedLimit
	if e.Quota != nil {
		out["quota"] = quota(*e.Quota)
	}
	return line(out)
}

func adapterFor(t *testing.T, name, url string) llm.KeyedBackend {
	t.Helper()
	keys := []string{"key-a", "key-b"}
	kind, _, _ := strings.Cut(name, "_")
	var (
		b   llm.KeyedBackend
		err error
	)
	switch kind {
	case "anthropic":
		b, err = anthropic.New(anthropic.Config{Name: "p", BaseURL: url, Keys: keys})
	case "gemini":
		b, err = gemini.New(gemini.Config{Name: "p", BaseURL: url, Keys: keys})
	case "llamacpp", "fakellm":
		b, err = openai.New(openai.KindOpenAI, openai.Config{Name: "p", BaseURL: url, Keys: keys})
	default:
		b, err = openai.New(kind, openai.Config{Name: "p", BaseURL: url, Keys: keys})
	}
	if err != nil {
		t.Fatal(err)
	}
	if n := b.Keys("m"); n != 2 {
		t.Fatalf("Keys = %d, want 2", n)
	}
	return b
}

// quota renders a Quota with its resets rounded up to whole seconds.
func quota(q llm.Quota) map[string]int {
	return map[string]int{
		"requests_remaining": q.RequestsRemaining, "tokens_remaining": q.TokensRemaining,
		"requests_reset_ms": ceilMs(q.RequestsReset), "tokens_reset_s": int(math.Ceil(q.TokensReset.Seconds())),
	}
}

// ceilMs keeps a sub-second reset ("12ms") visible, and rounds one made from a truncated
// instant up to the whole second it was written as.
func ceilMs(d time.Duration) int {
	if d >= time.Second {
		return int(math.Ceil(d.Seconds())) * 1000
	}
	return int(d / time.Millisecond)
}

func line(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	if err := enc.Encode(v); err != nil {
		panic(fmt.Sprint(err))
	}
	return b.String()
}
