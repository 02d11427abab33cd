package main

import (
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// heldBackend is an in-process backend whose calls the test finishes one by one: a call's
// stream yields one chunk once released, or fails when its context ends.
type heldBackend struct {
	name   string
	opened chan *heldCall
}

type heldCall struct {
	backend string
	model   string
	ctx     context.Context
	release chan struct{}
	closed  chan struct{}
	once    sync.Once
}

func newHeld(name string) *heldBackend {
	return &heldBackend{name: name, opened: make(chan *heldCall, 256)}
}

func (b *heldBackend) Open(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	c := &heldCall{backend: b.name, model: req.Model, ctx: ctx, release: make(chan struct{}), closed: make(chan struct{})}
	b.opened <- c
	return &heldStream{c: c}, nil
}

type heldStream struct {
	c    *heldCall
	sent int
}

func (s *heldStream) Next() (llm.Chunk, error) {
	switch s.sent {
	case 0:
		s.sent++
		return llm.Chunk{Role: "assistant"}, nil
	case 1:
		select {
		case <-s.c.release:
			s.sent++
			return llm.Chunk{Content: s.c.backend + "/" + s.c.model, FinishReason: llm.FinishStop}, nil
		case <-s.c.ctx.Done():
			return llm.Chunk{}, s.c.ctx.Err()
		}
	}
	return llm.Chunk{}, io.EOF
}

func (s *heldStream) Close() error {
	s.c.once.Do(func() { close(s.c.closed) })
	return nil
}

func (b *heldBackend) next(t *testing.T) *heldCall {
	t.Helper()
	select {
	case c := <-b.opened:
		return c
	case <-time.After(5 * time.Second):
		t.Fatalf("backend %s saw no call within 5s", b.name)
		return nil
	}
}

// heldSet makes backends that report their calls on one channel, in the order they start.
func heldSet(names ...string) (map[string]llm.Backend, *heldBackend) {
	shared := &heldBackend{name: "all", opened: make(chan *heldCall, 256)}
	m := map[string]llm.Backend{}
	for _, n := range names {
		m[n] = &heldBackend{name: n, opened: shared.opened}
	}
	return m, shared
}
