package fake

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tollgate/tollgate/providers/llm"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func userReq(model, text string) *llm.Request {
	return &llm.Request{Model: model, Messages: []llm.Message{{Role: "user", Content: llm.Content{Text: text}}}}
}

// drain reads a stream to its end and returns its chunks and the error that ended it
// (nil for io.EOF).
func drain(t *testing.T, s llm.Stream) ([]llm.Chunk, error) {
	t.Helper()
	var chunks []llm.Chunk
	for i := 0; i < 10000; i++ {
		c, err := s.Next()
		if err == io.EOF {
			return chunks, nil
		}
		if err != nil {
			return chunks, err
		}
		chunks = append(chunks, c)
	}
	t.Fatal("stream did not end")
	return nil, nil
}

func text(chunks []llm.Chunk) (content, reasoning string) {
	var c, r strings.Builder
	for _, ch := range chunks {
		c.WriteString(ch.Content)
		r.WriteString(ch.ReasoningContent)
	}
	return c.String(), r.String()
}

func TestOpenFailures(t *testing.T) {
	tests := []struct {
		fail   string
		kind   llm.Kind
		status int
		retry  time.Duration
	}{
		{FailRateLimited, llm.KindUpstreamRateLimited, 429, 3 * time.Second},
		{FailUnavailable, llm.KindProviderUnavailable, 503, 0},
		{FailInvalid, llm.KindUpstreamInvalid, 400, 0},
		{FailAuth, llm.KindUpstreamAuth, 401, 0},
		{FailQuota, llm.KindUpstreamQuota, 429, 0},
		{FailUpstream, llm.KindUpstream, 500, 0},
		{"no-such-mode", llm.KindUpstream, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.fail, func(t *testing.T) {
			b := New(Config{Name: "p1", Models: map[string]Script{
				"m": {Fail: tt.fail, RetryAfter: 3 * time.Second},
			}})
			s, err := b.Open(context.Background(), userReq("m", "hi"))
			if s != nil {
				t.Fatalf("Open returned a stream with error %v", err)
			}
			var e *llm.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v (%T) is not *llm.Error", err, err)
			}
			if e.Kind != tt.kind || e.Provider != "p1" || e.UpstreamStatus != tt.status || e.RetryAfter != tt.retry {
				t.Errorf("got kind %v provider %q status %d retry %v; want %v p1 %d %v",
					e.Kind, e.Provider, e.UpstreamStatus, e.RetryAfter, tt.kind, tt.status, tt.retry)
			}
			if b.Active() != 0 || b.Calls() != 1 {
				t.Errorf("Active %d Calls %d after a failed Open, want 0 and 1", b.Active(), b.Calls())
			}
		})
	}
}

func TestStreams(t *testing.T) {
	limit := func(n int) *int { return &n }
	tests := []struct {
		name      string
		script    Script
		req       *llm.Request
		content   string
		reasoning string
		finish    llm.FinishReason
		usage     llm.Usage
		wantErr   bool
		errKind   llm.Kind // the error's kind, when wantErr
	}{{
		name:    "reply",
		script:  Script{Reply: "Hello  there, world!\n"},
		req:     userReq("m", "one two three"),
		content: "Hello  there, world!\n",
		finish:  llm.FinishStop,
		usage:   llm.Usage{PromptTokens: 3, CompletionTokens: 3, TotalTokens: 6},
	}, {
		name:    "echo",
		req:     userReq("m", " ping  "),
		content: "Hello from Tollgate's demo backend. You said: ping",
		finish:  llm.FinishStop,
		usage:   llm.Usage{PromptTokens: 1, CompletionTokens: 8, TotalTokens: 9},
	}, {
		name:    "echo without user text",
		req:     &llm.Request{Model: "m"},
		content: "Hello from Tollgate's demo backend.",
		finish:  llm.FinishStop,
		usage:   llm.Usage{CompletionTokens: 5, TotalTokens: 5},
	}, {
		name:      "reasoning first",
		script:    Script{Reply: "four", Reasoning: "let me think"},
		req:       userReq("m", "2+2"),
		content:   "four",
		reasoning: "let me think",
		finish:    llm.FinishStop,
		usage:     llm.Usage{PromptTokens: 1, CompletionTokens: 4, TotalTokens: 5, ReasoningTokens: 3},
	}, {
		name:   "length",
		script: Script{Reply: "a b c d e"},
		req: &llm.Request{Model: "m", MaxTokens: limit(99), MaxCompletionTokens: limit(3),
			Messages: []llm.Message{{Role: "user", Content: llm.Content{Parts: []llm.Part{{Type: "text", Text: "x y"}}}}}},
		content: "a b c",
		finish:  llm.FinishLength,
		usage:   llm.Usage{PromptTokens: 2, CompletionTokens: 3, TotalTokens: 5},
	}, {
		name:    "limit equal to reply is a stop",
		script:  Script{Reply: "a b c"},
		req:     &llm.Request{Model: "m", MaxTokens: limit(3)},
		content: "a b c",
		finish:  llm.FinishStop,
		usage:   llm.Usage{CompletionTokens: 3, TotalTokens: 3},
	}, {
		name:    "midstream",
		script:  Script{Reply: "a b c d", Fail: FailMidstream},
		req:     userReq("m", "go"),
		content: "a b",
		wantErr: true,
		errKind: llm.KindUpstream,
	}, {
		name:    "truncated",
		script:  Script{Reply: "a b c d", Fail: FailTruncated},
		req:     userReq("m", "go"),
		content: "a b",
		wantErr: true,
		errKind: llm.KindUpstreamTruncated,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := New(Config{Name: "p", Default: tt.script})
			s, err := b.Open(context.Background(), tt.req)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			chunks, err := drain(t, s)
			if tt.wantErr {
				if llm.KindOf(err) != tt.errKind || err == nil {
					t.Fatalf("err = %v, want %s", err, tt.errKind)
				}
				if _, again := s.Next(); again != err {
					t.Errorf("Next after the error returned %v, want the same error", again)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if len(chunks) == 0 || chunks[0].Role != "assistant" || chunks[0].Content != "" {
				t.Fatalf("first chunk %+v, want a role-only chunk", chunks)
			}
			content, reasoning := text(chunks)
			if content != tt.content || reasoning != tt.reasoning {
				t.Errorf("content %q reasoning %q; want %q %q", content, reasoning, tt.content, tt.reasoning)
			}
			if tt.wantErr {
				return
			}
			last := chunks[len(chunks)-1]
			if last.FinishReason != tt.finish || last.Usage == nil || *last.Usage != tt.usage {
				t.Errorf("final chunk %+v usage %+v; want %v %+v", last, last.Usage, tt.finish, tt.usage)
			}
			for _, c := range chunks[:len(chunks)-1] {
				if c.FinishReason != "" || c.Usage != nil || c.Raw != nil {
					t.Errorf("non-final chunk %+v carries a finish, usage or Raw", c)
				}
			}
		})
	}
}

func TestModelsAndDefault(t *testing.T) {
	b := New(Config{Name: "p", Models: map[string]Script{"b": {Reply: "bee"}, "a": {Reply: "ay"}},
		Default: Script{Reply: "default"}})
	models, err := b.ListModels(context.Background())
	if err != nil || len(models) != 2 || models[0].ID != "a" || models[1].ID != "b" {
		t.Fatalf("ListModels = %+v, %v", models, err)
	}
	for model, want := range map[string]string{"a": "ay", "b": "bee", "zzz": "default"} {
		s, err := b.Open(context.Background(), userReq(model, "x"))
		if err != nil {
			t.Fatal(err)
		}
		chunks, err := drain(t, s)
		s.Close()
		if got, _ := text(chunks); err != nil || got != want {
			t.Errorf("model %s: got %q, %v; want %q", model, got, err, want)
		}
	}
}

func TestHangUntilCancelled(t *testing.T) {
	b := New(Config{Name: "p", Default: Script{Fail: FailHang}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { // exits when Open returns, which cancel guarantees
		_, err := b.Open(ctx, userReq("m", "x"))
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("hang returned before cancel: %v", err)
	default:
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if b.Active() != 0 {
		t.Errorf("Active = %d", b.Active())
	}
}

func TestCancelMidStream(t *testing.T) {
	b := New(Config{Name: "p", Default: Script{Reply: "a b c d"}})
	ctx, cancel := context.WithCancel(context.Background())
	s, err := b.Open(ctx, userReq("m", "x"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := 0; i < 2; i++ {
		if _, err := s.Next(); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	if _, err := s.Next(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next after cancel = %v, want context.Canceled", err)
	}
}

// A real timer must give way to cancellation: a one-hour delay ends as soon as ctx does.
func TestCancelDuringDelay(t *testing.T) {
	b := New(Config{Name: "p", Default: Script{Reply: "a b", FirstTokenDelay: time.Hour}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	s, err := b.Open(ctx, userReq("m", "x"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Next(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next = %v, want DeadlineExceeded", err)
	}
}

func TestPacing(t *testing.T) {
	var waits []time.Duration
	b := New(Config{Name: "p", Default: Script{Reply: "a b c", FirstTokenDelay: 250 * time.Millisecond, TokensPerSecond: 4}})
	b.Wait = func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
		return ctx.Err()
	}
	s, err := b.Open(context.Background(), userReq("m", "x"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := drain(t, s); err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{250 * time.Millisecond, 250 * time.Millisecond, 250 * time.Millisecond, 250 * time.Millisecond}
	if len(waits) != len(want) {
		t.Fatalf("waits %v, want %v", waits, want)
	}
	for i := range want {
		if waits[i] != want[i] {
			t.Fatalf("waits %v, want %v", waits, want)
		}
	}
}

func TestActiveAccounting(t *testing.T) {
	b := New(Config{Name: "p", Default: Script{Reply: "a"}})
	var streams []llm.Stream
	for i := 0; i < 3; i++ {
		s, err := b.Open(context.Background(), userReq("m", "x"))
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, s)
	}
	if b.Active() != 3 || b.MaxActive() != 3 || b.Calls() != 3 {
		t.Fatalf("Active %d MaxActive %d Calls %d, want 3 3 3", b.Active(), b.MaxActive(), b.Calls())
	}
	streams[0].Close()
	streams[0].Close() // idempotent
	if b.Active() != 2 {
		t.Fatalf("Active %d after closing one stream twice, want 2", b.Active())
	}
	if _, err := streams[0].Next(); !errors.Is(err, errClosed) {
		t.Errorf("Next after Close = %v", err)
	}
	for _, s := range streams[1:] {
		s.Close()
	}
	if b.Active() != 0 || b.MaxActive() != 3 {
		t.Fatalf("Active %d MaxActive %d, want 0 3", b.Active(), b.MaxActive())
	}
}

func TestConcurrentMaxActive(t *testing.T) {
	const n = 8
	b := New(Config{Name: "p", Default: Script{Reply: "a"}})
	all := make(chan struct{})
	var opened sync.WaitGroup
	opened.Add(n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() { // exits once all streams have been open at the same time
			defer wg.Done()
			s, err := b.Open(context.Background(), userReq("m", "x"))
			if err != nil {
				t.Error(err)
				opened.Done()
				return
			}
			opened.Done()
			<-all
			drain(t, s)
			s.Close()
		}()
	}
	opened.Wait()
	close(all)
	wg.Wait()
	if b.MaxActive() != n || b.Active() != 0 || b.Calls() != n {
		t.Fatalf("MaxActive %d Active %d Calls %d", b.MaxActive(), b.Active(), b.Calls())
	}
}

func TestOnOpen(t *testing.T) {
	boom := errors.New("boom")
	b := New(Config{Name: "p"})
	b.OnOpen = func(ctx context.Context, req *llm.Request) error { return boom }
	if _, err := b.Open(context.Background(), userReq("m", "x")); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	if b.Active() != 0 || b.Calls() != 1 {
		t.Errorf("Active %d Calls %d", b.Active(), b.Calls())
	}
}

func TestTokenize(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"a", []string{"a"}},
		{"a b", []string{"a", " b"}},
		{"  a  b \n", []string{"  a", "  b \n"}},
		{"   ", []string{"   "}},
		{"你好 世界 🎉", []string{"你好", " 世界", " 🎉"}},
	}
	for _, tt := range tests {
		got := Tokenize(tt.in)
		if strings.Join(got, "|") != strings.Join(tt.want, "|") || len(got) != len(tt.want) {
			t.Errorf("Tokenize(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func FuzzTokenize(f *testing.F) {
	for _, s := range []string{"", "a b", "  x\ty\n", "你好 世界", "\xff a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		toks := Tokenize(s)
		if strings.Join(toks, "") != s {
			t.Fatalf("tokens %q do not rebuild %q", toks, s)
		}
		words := len(strings.Fields(s))
		if words > 0 && len(toks) != words {
			t.Fatalf("%d tokens for %d words in %q", len(toks), words, s)
		}
	})
}

func TestHold(t *testing.T) {
	release := make(chan struct{})
	held := make(chan *llm.Request, 1)
	b := New(Config{Name: "p", Default: Script{Reply: "a b"}})
	b.Hold = func(ctx context.Context, req *llm.Request) error {
		held <- req
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}

	s, err := b.Open(context.Background(), userReq("m", "x"))
	if err != nil {
		t.Fatal(err)
	}
	if b.Active() != 1 {
		t.Fatalf("Active %d while the first Next has not run, want 1", b.Active())
	}
	got := make(chan []llm.Chunk, 1)
	go func() { // exits when the stream ends, after release
		chunks, err := drain(t, s)
		if err != nil {
			t.Error(err)
		}
		got <- chunks
	}()
	if req := <-held; req.Model != "m" {
		t.Errorf("Hold saw model %q, want m", req.Model)
	}
	close(release)
	if content, _ := text(<-got); content != "a b" {
		t.Errorf("content %q after release, want %q", content, "a b")
	}
	s.Close()

	// A cancelled call ends Hold, and the stream ends with the cancellation.
	release = make(chan struct{}) // the next call is never released
	ctx, cancel := context.WithCancel(context.Background())
	s, err = b.Open(ctx, userReq("m", "x"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	done := make(chan error, 1)
	go func() { // exits when Hold returns, on cancel
		_, err := s.Next()
		done <- err
	}()
	<-held
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Next after cancel = %v, want Canceled", err)
	}
	if _, err := s.Next(); !errors.Is(err, context.Canceled) {
		t.Errorf("Next after a failed hold = %v, want the same error again", err)
	}
}
