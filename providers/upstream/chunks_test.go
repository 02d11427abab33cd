package upstream

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/providers/llm"
)

// script is a Source that yields one step per Fill.
type script []struct {
	chunks []llm.Chunk
	err    error
}

func (s *script) Fill(out []llm.Chunk) ([]llm.Chunk, error) {
	if len(*s) == 0 {
		return out, io.EOF
	}
	step := (*s)[0]
	*s = (*s)[1:]
	return append(out, step.chunks...), step.err
}

// body records that it was closed.
type body struct {
	io.Reader
	closed bool
}

func (b *body) Close() error { b.closed = true; return nil }

func TestChunkStreamPrime(t *testing.T) {
	role := llm.Chunk{Role: "assistant"}
	text := llm.Chunk{Content: "Hi"}
	overloaded := &llm.Error{Kind: llm.KindProviderUnavailable, Message: "Overloaded"}
	tests := []struct {
		name      string
		script    script
		wantErr   llm.Kind // from Prime; 0: none
		wantNext  []string // contents of the chunks Next then returns, role chunks as "role"
		wantFinal error
	}{
		{name: "error right after the role chunk",
			script: script{{chunks: []llm.Chunk{role}}, {err: overloaded}}, wantErr: llm.KindProviderUnavailable},
		{name: "error after empty events",
			script: script{{chunks: []llm.Chunk{role}}, {}, {chunks: []llm.Chunk{{}}}, {err: overloaded}}, wantErr: llm.KindProviderUnavailable},
		{name: "content then error",
			script:   script{{chunks: []llm.Chunk{role}}, {chunks: []llm.Chunk{text}}, {err: overloaded}},
			wantNext: []string{"role", "Hi"}, wantFinal: overloaded},
		{name: "role and content in one event",
			script: script{{chunks: []llm.Chunk{role, text}}}, wantNext: []string{"role", "Hi"}, wantFinal: io.EOF},
		{name: "clean end with only a role is an empty answer, not an error",
			script: script{{chunks: []llm.Chunk{role}}}, wantNext: []string{"role"}, wantFinal: io.EOF},
		{name: "finish reason alone is an answer",
			script:   script{{chunks: []llm.Chunk{{FinishReason: llm.FinishStop}}}, {err: overloaded}},
			wantNext: []string{""}, wantFinal: overloaded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &body{Reader: strings.NewReader("")}
			cancelled := false
			src := tt.script
			s := NewChunkStream("p", b, func() { cancelled = true }, &src)
			err := s.Prime()
			if tt.wantErr != 0 {
				if llm.KindOf(err) != tt.wantErr || !b.closed || !cancelled {
					t.Fatalf("Prime = %v (body closed %v, cancelled %v), want kind %v and a closed stream", err, b.closed, cancelled, tt.wantErr)
				}
				if e, _ := errors.AsType[*llm.Error](err); e.Provider != "p" {
					t.Errorf("provider %q, want p", e.Provider)
				}
				return
			}
			if err != nil {
				t.Fatalf("Prime = %v", err)
			}
			defer s.Close()
			var got []string
			for {
				c, err := s.Next()
				if err != nil {
					if !errors.Is(err, tt.wantFinal) {
						t.Errorf("final error %v, want %v", err, tt.wantFinal)
					}
					break
				}
				if c.Role != "" {
					got = append(got, "role")
				} else {
					got = append(got, c.Content)
				}
			}
			if strings.Join(got, "|") != strings.Join(tt.wantNext, "|") {
				t.Errorf("chunks %q, want %q", got, tt.wantNext)
			}
		})
	}
}

func TestChunkStreamClose(t *testing.T) {
	b := &body{Reader: strings.NewReader("")}
	src := script{{chunks: []llm.Chunk{{Content: "a"}, {Content: "b"}}}}
	s := NewChunkStream("p", b, nil, &src)
	if c, err := s.Next(); err != nil || c.Content != "a" {
		t.Fatalf("Next = %+v, %v", c, err)
	}
	if err := s.Close(); err != nil || !b.closed {
		t.Fatalf("Close = %v, body closed %v", err, b.closed)
	}
	if _, err := s.Next(); !errors.Is(err, ErrStreamClosed) {
		t.Errorf("Next after Close = %v, want ErrStreamClosed (the pending chunk is dropped)", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}

	done := Chunks([]llm.Chunk{{Content: "x"}}, io.EOF)
	if c, err := done.Next(); err != nil || c.Content != "x" {
		t.Fatalf("Chunks: Next = %+v, %v", c, err)
	}
	if _, err := done.Next(); err != io.EOF {
		t.Errorf("Chunks: end = %v, want io.EOF", err)
	}
	if err := done.Close(); err != nil {
		t.Errorf("Chunks: Close = %v", err)
	}
	if _, err := done.Next(); err != io.EOF {
		t.Errorf("Chunks: Next after a complete answer's Close = %v, want io.EOF", err)
	}
}

func TestWithProvider(t *testing.T) {
	named := &llm.Error{Kind: llm.KindUpstream, Provider: "a"}
	anon := &llm.Error{Kind: llm.KindUpstream}
	plain := errors.New("x")
	if WithProvider(named, "b"); named.Provider != "a" {
		t.Errorf("a named provider was replaced by %q", named.Provider)
	}
	if WithProvider(anon, "b"); anon.Provider != "b" {
		t.Errorf("provider %q, want b", anon.Provider)
	}
	if WithProvider(plain, "b") != plain || WithProvider(nil, "b") != nil {
		t.Error("a plain error or nil was changed")
	}
}
