package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/cmd/internal/statuswriter"
)

// tap sits in front of one fake backend (an httptest server running fakellm) and sees every
// request the gateway sends it, as the backend sees it. It measures what fakellm does not:
// concurrency per model, and the order in which tagged requests arrived. It can also hold
// requests whose prompt carries holdTag until the scenario releases them, so a scenario can
// keep lanes busy deterministically.
//
// Its counters rise before the backend handler runs and fall after it has returned, the same
// bracket as fakellm's own, so the two agree on what "concurrent" means.
type tap struct {
	next    http.Handler
	models  *modelGauges
	global  *gauge // concurrency across every tap of a setup
	held    atomic.Int64
	holding chan struct{} // closed by release
	all     gauge         // concurrency on this backend
	// onEnter, when set, is told of every request as it arrives, with this backend's and
	// its model's concurrency counting it (the reload scenario checks them against the
	// settings in force). Set before the backend serves.
	onEnter func(model, tag string, backend, inModel int64)

	mu      sync.Mutex
	order   []string    // tags, in arrival order
	refused []time.Time // when the backend answered a call with 429 or 503, in order
}

// holdTag in a prompt makes the tap park the request until release is called.
const holdTag = "[hold]"

func newTap(next http.Handler, global *gauge) *tap {
	return &tap{next: next, models: newModelGauges(), global: global, holding: make(chan struct{})}
}

func (t *tap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		t.next.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "tap: read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	model, tag := peek(body)
	n := t.models.enter(model)
	t.global.enter()
	t.all.enter()
	defer func() { t.models.leave(model); t.global.leave(); t.all.leave() }()
	if t.onEnter != nil {
		t.onEnter(model, tag, t.all.now.Load(), int64(n))
	}
	if tag != "" {
		t.mu.Lock()
		t.order = append(t.order, tag)
		t.mu.Unlock()
	}
	if bytes.Contains(body, []byte(holdTag)) {
		t.held.Add(1)
		select {
		case <-t.holding:
		case <-r.Context().Done():
		}
		t.held.Add(-1)
	}
	sw := statuswriter.New(w)
	t.next.ServeHTTP(sw, r)
	if st := sw.Status(); st == http.StatusTooManyRequests || st == http.StatusServiceUnavailable {
		t.mu.Lock()
		t.refused = append(t.refused, time.Now())
		t.mu.Unlock()
	}
}

// refusals returns when the backend refused calls, in order.
func (t *tap) refusals() []time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]time.Time(nil), t.refused...)
}

// release lets every held request (and every later one) through. Safe to call twice.
func (t *tap) release() {
	t.mu.Lock()
	defer t.mu.Unlock()
	select {
	case <-t.holding:
	default:
		close(t.holding)
	}
}

// arrivals returns the tags in the order the requests reached the backend.
func (t *tap) arrivals() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.order...)
}

// peek reads the model and the harness's tag (the first word after "tag:" at the start of
// the last message) from a chat request body. A body it cannot read yields empty strings.
func peek(body []byte) (model, tag string) {
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil {
		return "", ""
	}
	if n := len(req.Messages); n > 0 {
		var text string
		if json.Unmarshal(req.Messages[n-1].Content, &text) == nil {
			if rest, ok := strings.CutPrefix(text, "tag:"); ok {
				if f := strings.Fields(rest); len(f) > 0 {
					tag = f[0]
				}
			}
		}
	}
	return req.Model, tag
}
