package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// target is one way of reaching the fake backend.
type target struct {
	name   string // "direct", "proxy", "tollgate"
	url    string // the chat completions URL
	model  string // the model id as this target spells it
	client *http.Client
	bodies [2][]byte // request bodies: [0] non-streaming, [1] streaming
}

func newTarget(name, base, model string, conc int) *target {
	t := &target{name: name, url: base + "/v1/chat/completions", model: model,
		client: &http.Client{Transport: benchTransport(conc + 8)}}
	for i, stream := range []bool{false, true} {
		req := map[string]any{
			"model":    model,
			"messages": []map[string]string{{"role": "user", "content": "Say hello in twenty words."}},
			"stream":   stream,
		}
		if stream {
			// Tollgate asks the backend for usage on every stream; asking on every path
			// makes the backend do the same work for all three targets.
			req["stream_options"] = map[string]bool{"include_usage": true}
		}
		t.bodies[i], _ = json.Marshal(req)
	}
	return t
}

// sample is one successful request's timing.
type sample struct {
	total time.Duration // until the body was read to its end
	first time.Duration // until the first SSE event (streams) or the first body byte
}

// worker holds one driver goroutine's reusable buffers.
type worker struct {
	br  *bufio.Reader
	buf []byte
}

func newWorker() *worker {
	return &worker{br: bufio.NewReaderSize(nil, 16<<10), buf: make([]byte, 0, 4<<10)}
}

// errStream marks a stream that failed by its content (no [DONE], an error event, too few
// chunks) rather than by transport.
var errStream = errors.New("bad stream")

// do sends one request with a fresh in-memory body and reads the answer to its end. Its
// times run from start: now in a closed loop, when the call was due in an open one.
func (wk *worker) do(ctx context.Context, t *target, stream bool, minChunks int, start time.Time) (sample, error) {
	body := t.bodies[0]
	if stream {
		body = t.bodies[1]
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(body))
	if err != nil {
		return sample{}, fmt.Errorf("%s: build request: %w", t.name, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := t.client.Do(req)
	if err != nil {
		return sample{}, fmt.Errorf("%s: call: %w", t.name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return sample{}, fmt.Errorf("%s: status %d: %s", t.name, resp.StatusCode, bytes.TrimSpace(b))
	}
	var s sample
	if stream {
		s.first, err = wk.readStream(resp.Body, start, minChunks)
	} else {
		s.first, err = wk.readWhole(resp.Body, start)
	}
	s.total = time.Since(start)
	if err != nil {
		return sample{}, fmt.Errorf("%s: %w", t.name, err)
	}
	return s, nil
}

// readStream reads an SSE answer to EOF. It fails unless the stream has at least minChunks
// data events, no error event, and ends with data: [DONE].
func (wk *worker) readStream(r io.Reader, start time.Time, minChunks int) (time.Duration, error) {
	wk.br.Reset(r)
	var first time.Duration
	events, done, inEvent := 0, false, false
	for {
		line, err := wk.br.ReadSlice('\n')
		if err != nil && !(err == io.EOF && len(line) > 0) {
			if err == io.EOF {
				break
			}
			return 0, fmt.Errorf("stream broken after %d events: %w", events, err)
		}
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0:
			if inEvent && first == 0 {
				first = time.Since(start)
			}
			inEvent = false
		case bytes.HasPrefix(line, []byte("event: error")):
			return 0, fmt.Errorf("%w: error event", errStream)
		case bytes.HasPrefix(line, []byte("data:")):
			data := bytes.TrimSpace(line[len("data:"):])
			if done {
				return 0, fmt.Errorf("%w: data after [DONE]", errStream)
			}
			if bytes.Equal(data, []byte("[DONE]")) {
				done = true
			} else if bytes.HasPrefix(data, []byte(`{"error"`)) {
				return 0, fmt.Errorf("%w: error event: %.200s", errStream, data)
			} else {
				events++
			}
			inEvent = true
		}
	}
	switch {
	case !done:
		return 0, fmt.Errorf("%w: ended without [DONE] after %d events", errStream, events)
	case events < minChunks:
		return 0, fmt.Errorf("%w: %d events, want at least %d", errStream, events, minChunks)
	}
	return first, nil
}

// readWhole reads a chat.completion body and checks that it is one.
func (wk *worker) readWhole(r io.Reader, start time.Time) (time.Duration, error) {
	b := wk.buf[:0]
	var first time.Duration
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		if n > 0 && first == 0 {
			first = time.Since(start)
		}
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("read body: %w", err)
		}
	}
	wk.buf = b
	if !json.Valid(b) || !bytes.Contains(b, []byte(`"chat.completion"`)) {
		return 0, fmt.Errorf("not a chat.completion: %.200s", b)
	}
	return first, nil
}

// batch is the outcome of n requests at one concurrency against one target.
type batch struct {
	samples []sample
	errs    int
	errMsgs []string // the first few errors
	elapsed time.Duration
}

// maxErrMsgs bounds how many error messages a batch keeps for the report.
const maxErrMsgs = 5

// runBatch sends n requests to t from conc goroutines, each starting its next request as
// soon as its previous one is read (a closed loop), and times the whole.
func runBatch(ctx context.Context, t *target, stream bool, conc, n, minChunks int) batch {
	var (
		next atomic.Int64
		mu   sync.Mutex
		out  = batch{samples: make([]sample, 0, n)}
		wg   sync.WaitGroup
	)
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() { // exits when the batch's n requests are taken or ctx ends
			defer wg.Done()
			wk := newWorker()
			local := make([]sample, 0, n/conc+1)
			var errs []error
			for next.Add(1) <= int64(n) && ctx.Err() == nil {
				s, err := wk.do(ctx, t, stream, minChunks, time.Now())
				if err != nil {
					errs = append(errs, err)
					continue
				}
				local = append(local, s)
			}
			mu.Lock()
			defer mu.Unlock()
			out.samples = append(out.samples, local...)
			out.errs += len(errs)
			for _, err := range errs {
				if len(out.errMsgs) < maxErrMsgs {
					out.errMsgs = append(out.errMsgs, err.Error())
				}
			}
		}()
	}
	wg.Wait()
	out.elapsed = time.Since(start)
	return out
}
