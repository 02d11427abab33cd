package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/sse"
)

func TestReadAnswer(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		body io.Reader
		want string   // the body returned, when no error
		kind llm.Kind // the error's kind, when there is one
		err  string   // a part of the error's message; "" = no error
	}{
		{"whole object", nil, strings.NewReader(`{"a":[1,2]}`), `{"a":[1,2]}`, 0, ""},
		{"leading blank lines", nil, strings.NewReader("\n\n{}"), "\n\n{}", 0, ""},
		{"not JSON is the caller's to judge", nil, strings.NewReader("<html>"), "<html>", 0, ""},
		{"garbage JSON is the caller's to judge", nil, strings.NewReader(`{"a" 1}`), `{"a" 1}`, 0, ""},
		{"at the limit", nil, strings.NewReader(`{"x":"` + strings.Repeat("y", 16-8) + `"}`), `{"x":"yyyyyyyy"}`, 0, ""},
		{"over the limit", nil, strings.NewReader(`{"x":"` + strings.Repeat("y", 20) + `"}`), "", llm.KindUpstream, "larger than 16 bytes"},
		{"object cut", nil, strings.NewReader(`{"a":[1,`), "", llm.KindUpstreamTruncated, "stops before its end, after 8 bytes"},
		{"array cut", nil, strings.NewReader(`[{"a":1}`), "", llm.KindUpstreamTruncated, "stops before its end"},
		{"string cut", nil, strings.NewReader(`{"a":"b`), "", llm.KindUpstreamTruncated, "stops before its end"},
		{"connection broke off", nil, io.MultiReader(strings.NewReader(`{"a":`), iotest.ErrReader(io.ErrUnexpectedEOF)), "", llm.KindUpstreamTruncated, "broke off after 5 bytes"},
		{"connection broke off before any byte", nil, iotest.ErrReader(io.ErrUnexpectedEOF), "", llm.KindUpstream, "reading the answer"},
		{"read failed", nil, iotest.ErrReader(errors.New("connection reset by peer")), "", llm.KindUpstream, "reading the answer: connection reset"},
		{"key scrubbed", nil, iotest.ErrReader(errors.New("echo sk-secret-key-123")), "", llm.KindUpstream, "[redacted]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := tt.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			b, err := ReadAnswer(ctx, "p", tt.body, 16, "sk-secret-key-123")
			if tt.err == "" {
				if err != nil || string(b) != tt.want {
					t.Fatalf("ReadAnswer = %q, %v; want %q", b, err, tt.want)
				}
				return
			}
			e, ok := errors.AsType[*llm.Error](err)
			if !ok || e.Kind != tt.kind || e.Provider != "p" || !strings.Contains(e.Message, tt.err) {
				t.Fatalf("ReadAnswer error = %v; want %s containing %q", err, tt.kind, tt.err)
			}
			if errors.Is(err, io.EOF) {
				t.Fatalf("%v wraps io.EOF: a caller would take it for a complete answer", err)
			}
		})
	}
	if _, err := ReadAnswer(cancelled, "p", iotest.ErrReader(context.Canceled), 16); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled read = %v, want the context's error", err)
	}
}

func TestEndError(t *testing.T) {
	tooBig := fmt.Errorf("%w: an event passed 8 bytes without ending", sse.ErrEventTooLarge)
	tests := []struct {
		err     error
		started bool
		kind    llm.Kind
		msg     string
	}{
		{io.EOF, true, llm.KindUpstreamTruncated, "the stream ended before message_stop"},
		{io.ErrUnexpectedEOF, true, llm.KindUpstreamTruncated, "the stream ended before message_stop"},
		{fmt.Errorf("read body: %w", io.ErrUnexpectedEOF), true, llm.KindUpstreamTruncated, "the stream ended before message_stop"},
		{io.EOF, false, llm.KindUpstream, "ended before any event"},
		{io.ErrUnexpectedEOF, false, llm.KindUpstream, "ended before any event"},
		{tooBig, true, llm.KindUpstream, "over the size limit (max_event_bytes)"},
		{errors.New("connection reset by peer"), true, llm.KindUpstream, "reading the stream: connection reset by peer"},
	}
	for _, tt := range tests {
		e := EndError(tt.err, tt.started, "before message_stop")
		if e.Kind != tt.kind || !strings.Contains(e.Message, tt.msg) || errors.Is(e, io.EOF) {
			t.Errorf("EndError(%v) = %s %q (wraps EOF: %v); want %s %q", tt.err, e.Kind, e.Message, errors.Is(e, io.EOF), tt.kind, tt.msg)
		}
	}
}

// TestEndErrorScrubsKeys: a broken read whose error quotes a key (a proxy echoing the
// request's headers, say) reaches neither the client's message nor the log's detail with it.
func TestEndErrorScrubsKeys(t *testing.T) {
	const key = "sk-live-0123456789"
	for _, err := range []error{
		errors.New("proxy: upstream refused Authorization: Bearer " + key),
		fmt.Errorf("%w: an event quoting %s passed 8 bytes", sse.ErrEventTooLarge, key),
	} {
		e := EndError(err, true, "before message_stop", "short", key)
		if strings.Contains(e.Message, key) || strings.Contains(e.Detail, key) {
			t.Errorf("EndError(%v): message %q, detail %q: the key is shown", err, e.Message, e.Detail)
		}
		if !strings.Contains(e.Message+e.Detail, "[redacted]") {
			t.Errorf("EndError(%v): message %q, detail %q: want the key replaced by [redacted]", err, e.Message, e.Detail)
		}
	}
}

// FuzzReadAnswer: whatever the body, ReadAnswer returns it whole, or says why not: over the
// size cap, or a JSON object or array that stops before it closes. Nothing else is refused,
// and nothing cut is returned as an answer.
func FuzzReadAnswer(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":`, `[1,2`, "  \n{}", "<html>", `{"a" 1}`, `"str`, ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		const max = 64
		b, err := ReadAnswer(context.Background(), "p", bytes.NewReader(body), max)
		trimmed := bytes.TrimSpace(body)
		cut := len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') && !json.Valid(trimmed) &&
			errors.Is(json.NewDecoder(bytes.NewReader(trimmed)).Decode(new(json.RawMessage)), io.ErrUnexpectedEOF)
		switch kind := llm.KindOf(err); {
		case err == nil:
			if !bytes.Equal(b, body) || len(body) > max || cut {
				t.Fatalf("accepted %q as %q", body, b)
			}
		case kind == llm.KindUpstreamTruncated:
			if !cut || len(body) > max || errors.Is(err, io.EOF) {
				t.Fatalf("%q called truncated: %v", body, err)
			}
		case kind == llm.KindUpstream:
			if len(body) <= max {
				t.Fatalf("%q refused: %v", body, err)
			}
		default:
			t.Fatalf("%q: unexpected %v", body, err)
		}
	})
}
