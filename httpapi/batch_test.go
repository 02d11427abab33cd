package httpapi

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tollgate/tollgate/providers/llm"
)

// batchStub admits every batch with its scripts, one member each, in order.
type batchStub struct {
	stubGateway
	members []*script
	errs    []error // a member's failure to start, by index
}

func (g batchStub) StartBatch(_ context.Context, models []string, _ llm.Priority, _ *llm.Request) ([]llm.BatchMember, error) {
	if len(models) != len(g.members) {
		return nil, errors.New("batchStub: wrong member count")
	}
	out := make([]llm.BatchMember, len(models))
	for i, m := range models {
		out[i] = llm.BatchMember{Served: llm.Served{Model: m, Provider: strings.Split(m, "/")[0], Attempts: 1,
			QueueWait: time.Duration(i) * time.Millisecond}}
		if i < len(g.errs) && g.errs[i] != nil {
			out[i].Err = g.errs[i]
			continue
		}
		out[i].Stream = g.members[i]
	}
	return out, nil
}

// TestBatchGolden pins a batch's answer, streamed and whole, to its golden file: each
// member's events with its batch_index (a streamed batch's members interleave as they come,
// so the file holds them member by member, in each member's own order), its usage when the
// client asked for it, a member's error event or error, and one [DONE] at the end.
func TestBatchGolden(t *testing.T) {
	broke := &llm.Error{Kind: llm.KindUpstream, Provider: "c", Message: "backend broke"}
	refused := &llm.Error{Kind: llm.KindProviderUnavailable, Provider: "d", Message: "provider d is out of service"}
	complete := []llm.Chunk{{Raw: []byte(`{"id":"c","object":"chat.completion","choices":[]}`), Complete: true}}
	cases := []struct {
		name   string
		stream bool
		usage  bool
	}{
		{"batch-stream-usage", true, true},
		{"batch-stream", true, false},
		{"batch-whole", false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			scripts := []*script{
				{chunks: slices.Clone(structuredChunks)},
				{chunks: slices.Clone(raw)},
				{chunks: slices.Clone(structuredChunks[:3]), err: broke},
				nil,
			}
			if !tc.stream {
				scripts[1] = &script{chunks: slices.Clone(complete)}
			}
			s := New(Options{Gateway: batchStub{members: scripts, errs: []error{3: refused}}, Logger: zerolog.Nop(),
				Now: func() time.Time { return time.Unix(1767225600, 0) }})
			body := `{"models":["a/m","b/m","c/m","d/m"],"messages":[{"role":"user","content":"hi"}]`
			if tc.stream {
				body += `,"stream":true`
			}
			if tc.usage {
				body += `,"stream_options":{"include_usage":true}`
			}
			req := httptest.NewRequest("POST", batchRoute, strings.NewReader(body+"}"))
			req.Header.Set("X-Request-Id", "req-1")
			w := httptest.NewRecorder()
			s.ServeHTTP(w, req)
			for i, sc := range scripts[:3] {
				if !sc.closed {
					t.Errorf("member %d's stream not closed", i)
				}
			}
			got := w.Result().Status + "\n" + "Content-Type: " + w.Header().Get("Content-Type") + "\n\n"
			if tc.stream {
				got += byMember(t, w.Body.String())
			} else {
				got += w.Body.String()
			}
			golden := filepath.Join("..", "testdata", "httpapi", tc.name+".golden")
			if *update {
				os.MkdirAll(filepath.Dir(golden), 0o755)
				os.WriteFile(golden, []byte(got), 0o644)
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			if got != string(want) {
				t.Errorf("mismatch with %s:\n got:\n%s\nwant:\n%s", golden, got, want)
			}
		})
	}
}

// byMember orders a streamed batch's events by their batch_index, keeping each member's own
// order, and checks that the one [DONE] comes last.
func byMember(t *testing.T, body string) string {
	t.Helper()
	events := strings.SplitAfter(body, "\n\n")
	if n := len(events); n < 2 || events[n-1] != "" || events[n-2] != "data: [DONE]\n\n" {
		t.Fatalf("the stream does not end with one data: [DONE]:\n%s", body)
	}
	events = events[:len(events)-2]
	index := func(ev string) string {
		_, rest, ok := strings.Cut(ev, `{"batch_index":`)
		if !ok || strings.Contains(ev, "[DONE]") {
			t.Fatalf("event without batch_index: %q", ev)
		}
		n, _, _ := strings.Cut(rest, ",")
		return n
	}
	slices.SortStableFunc(events, func(a, b string) int { return strings.Compare(index(a), index(b)) })
	return strings.Join(events, "") + "data: [DONE]\n\n"
}
