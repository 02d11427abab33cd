package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/julienschmidt/httprouter"

	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/sse"
)

// batchRoute is SPEC §5's all-or-nothing batch: one chat request to several models, whose
// members all start at the same instant or none does.
const batchRoute = "/v1/batch/chat/completions"

// BatchGateway is the optional capability of a gateway that admits batches (SPEC §5); the
// route exists only when the Gateway has it.
type BatchGateway interface {
	// StartBatch admits every member at once or none; see actors.Gateway.StartBatch.
	StartBatch(ctx context.Context, models []string, prio llm.Priority, req *llm.Request) ([]llm.BatchMember, error)
}

// batch serves POST /v1/batch/chat/completions. The batch has one log line; once it has
// started, each member is observed (metrics) as a request of its own model.
func (s *Server) batch(bg BatchGateway) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
		claimLog(w)
		rec := &record{start: s.opts.Now(), id: requestID(r.Context()), route: batchRoute}
		var parts []record // the members', once the batch started
		defer func() { s.logBatch(rec, parts) }()
		prio, body, aerr := s.readRequest(w, r)
		var models []string
		var req *llm.Request
		if aerr == nil {
			models, req, aerr = parseBatch(body)
		}
		if aerr == nil {
			prio, aerr = s.clientGate(r.Context(), rec, models, prio)
		}
		if aerr != nil {
			rec.fail(*aerr)
			aerr.write(w)
			return
		}
		rec.model, rec.prio, rec.stream = strings.Join(models, ","), prio, req.Stream
		// The members' calls end with this context: the client leaving, or the stream to it
		// failing (batchStream cancels it), stops every member's backend.
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		r = r.WithContext(ctx)
		members, err := bg.StartBatch(ctx, models, prio, req)
		if err != nil {
			if a, ok := s.answerError(r, err, rec); ok {
				a.write(w)
			}
			return
		}
		defer func() {
			for _, m := range members {
				if m.Stream != nil {
					_ = m.Stream.Close()
				}
			}
		}()
		parts = make([]record, len(members))
		var providers []string
		for i, m := range members {
			parts[i] = record{id: rec.id, route: batchRoute, model: m.Model, servedBy: m.Model, provider: m.Provider, client: rec.client,
				prio: prio, stream: req.Stream, start: rec.start, queue: m.QueueWait, attempts: m.Attempts}
			rec.attempts += m.Attempts
			if !slices.Contains(providers, m.Provider) {
				providers = append(providers, m.Provider)
			}
		}
		rec.provider = strings.Join(providers, ",")
		w = s.writeDeadlines(w)
		if req.Stream {
			s.batchStream(w, r, cancel, members, req, rec, parts)
		} else {
			s.batchWhole(w, r, members, req, rec, parts)
		}
	}
}

// logBatch writes the batch's log line, with the members' tokens summed, and observes each
// member that started as a request of its model.
func (s *Server) logBatch(rec *record, parts []record) {
	if parts == nil {
		s.logChat(rec)
		return
	}
	for i := range parts {
		p := &parts[i]
		rec.usage.PromptTokens += p.usage.PromptTokens
		rec.usage.CompletionTokens += p.usage.CompletionTokens
		rec.usage.TotalTokens += p.usage.TotalTokens
		p.clientGone = p.clientGone || rec.clientGone
		s.account(p, p.finalStatus())
		rec.cost += p.cost
	}
	_, duration := s.logLine(rec)
	for i := range parts {
		s.observe(&parts[i], parts[i].finalStatus(), duration)
	}
}

// parseBatch reads a chat request that names "models" instead of "model": 2 or more ids
// (the gateway refuses more than it takes, 400 batch_too_large). Every member gets the rest
// of the body as its chat request; "models" is not sent to any backend.
func parseBatch(body []byte) ([]string, *llm.Request, *apiError) {
	var fields map[string]json.RawMessage
	if _, a := decodeObject(body, &fields); a != nil {
		return nil, nil, a
	}
	raw, ok := fields["models"]
	if !ok {
		return nil, nil, invalidf("models", "missing required field: models (a list of 2 or more model ids)")
	}
	if _, ok := fields["model"]; ok {
		return nil, nil, invalidf("model", "a batch names its models in models, not model")
	}
	var models []string
	if err := json.Unmarshal(raw, &models); err != nil {
		return nil, nil, invalidf("models", "models must be an array of model id strings")
	}
	if len(models) < 2 {
		return nil, nil, invalidf("models", "a batch names at least 2 models, this one %d (send one model to /v1/chat/completions)", len(models))
	}
	for i, m := range models {
		if m == "" {
			return nil, nil, invalidf(fmt.Sprintf("models[%d]", i), "models[%d] is empty", i)
		}
	}
	delete(fields, "models")
	fields["model"], _ = json.Marshal(models[0]) // each member's own id replaces it
	member, _ := json.Marshal(fields)
	req, a := parseChat(member)
	if a != nil {
		return nil, nil, a
	}
	return models, req, nil
}

// batchResult is one member of a non-streamed batch answer (SPEC §5).
type batchResult struct {
	Model      string          `json:"model"`
	QueueMs    int64           `json:"queue_ms"`
	Completion json.RawMessage `json:"completion,omitempty"`
	Error      *errorDetail    `json:"error,omitempty"`
}

// batchWhole answers with every member's completion or error, in request order, once all
// have ended; one member's failure does not stop the others.
func (s *Server) batchWhole(w http.ResponseWriter, r *http.Request, members []llm.BatchMember, req *llm.Request,
	rec *record, parts []record) {
	results := make([]batchResult, len(members))
	var wg sync.WaitGroup
	for i := range members {
		wg.Go(func() { // exits when the member's answer has ended
			results[i] = s.wholeMember(r, members[i], req, &parts[i], i)
		})
	}
	wg.Wait()
	if r.Context().Err() != nil {
		rec.clientGone = true
		return
	}
	rec.ttfb = s.opts.Now().Sub(rec.start)
	writeJSON(w, http.StatusOK, struct {
		Object  string        `json:"object"`
		Results []batchResult `json:"results"`
	}{"batch.chat.completion", results})
}

// wholeMember reads member i to its end: its completion, or its error.
func (s *Server) wholeMember(r *http.Request, m llm.BatchMember, req *llm.Request, part *record, i int) batchResult {
	res := batchResult{Model: m.Model, QueueMs: m.QueueWait.Milliseconds()}
	fail := func(err error) batchResult {
		a := toAPIError(err, s.opts.Gateway.RetryAfter())
		a.retryAfter = 0 // the batch as a whole answers 200: there is nothing to retry after
		part.fail(a)
		d := a.body().Error
		res.Error = &d
		return res
	}
	if m.Err != nil {
		return fail(m.Err)
	}
	var acc completion
	for {
		ch, err := m.Stream.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fail(err)
		}
		if ch.Usage != nil {
			part.usage = *ch.Usage
		}
		if ch.Complete {
			res.Completion = ch.Raw
			return res
		}
		if err := acc.add(&ch); err != nil {
			return fail(&llm.Error{Kind: llm.KindUpstream, Provider: m.Provider, Message: "backend sent an undecodable chunk: " + err.Error()})
		}
	}
	res.Completion, _ = json.Marshal(acc.build(part.id+"-"+strconv.Itoa(i), m.Model, s.opts.Now()))
	return res
}

// batchStream relays every member's chunks as they come, each with "batch_index", and ends
// with one data: [DONE] after all members have ended (SPEC §5). A member's failure ends only
// its own part, with an error event carrying its batch_index. A client that leaves stops
// every member: cancel ends their calls.
func (s *Server) batchStream(w http.ResponseWriter, r *http.Request, cancel context.CancelFunc, members []llm.BatchMember,
	req *llm.Request, rec *record, parts []record) {
	sse.SetHeaders(w.Header())
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	out := sse.NewWriter(struct{ io.Writer }{w}) // hides the Flusher: flushing is ours
	if rc.Flush() != nil {
		rec.clientGone = true
		return
	}
	events := make(chan []byte, 2*len(members))
	quit := make(chan struct{})
	var wg sync.WaitGroup
	for i := range members {
		wg.Go(func() { s.streamMember(r, members[i], req, &parts[i], i, events, quit) }) // exits when its member ends or at quit
	}
	go func() { wg.Wait(); close(events) }() // exits when every member has ended
	gone := false
	for data := range events {
		if gone {
			continue // what members still send while their cancellation lands
		}
		if rec.ttfb == 0 {
			rec.ttfb = s.opts.Now().Sub(rec.start)
		}
		// Flush when nothing else is ready to go: events that came together share a write.
		if out.Data(data) != nil || (len(events) == 0 && rc.Flush() != nil) {
			gone = true
			rec.clientGone = true
			close(quit)
			cancel() // stops every member's backend: the members end, and so does this loop
		}
	}
	if !gone && (out.Data(doneData) != nil || rc.Flush() != nil) {
		rec.clientGone = true
	}
}

// streamMember sends member i's events, each marked with its batch_index, until it ends or
// quit.
func (s *Server) streamMember(r *http.Request, m llm.BatchMember, req *llm.Request, part *record, i int,
	events chan<- []byte, quit <-chan struct{}) {
	send := func(data []byte) bool {
		select {
		case events <- withIndex(data, i):
			return true
		case <-quit:
			return false
		}
	}
	fail := func(err error) {
		if r.Context().Err() != nil || errors.Is(err, context.Canceled) {
			part.clientGone = true
			return // the client left: nothing to tell it
		}
		a := toAPIError(err, s.opts.Gateway.RetryAfter())
		a.retryAfter = 0 // too late to act on a wait: the member's part just ends
		part.fail(a)
		send(a.event())
	}
	if m.Err != nil {
		fail(m.Err)
		return
	}
	enc := newChunkEncoder(part.id+"-"+strconv.Itoa(i), m.Model, s.opts.Now())
	var usage *llm.Usage // a structured stream's usage, sent last when the client asked for it
	for {
		ch, err := m.Stream.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			fail(err)
			return
		}
		if part.ttfb == 0 {
			part.ttfb = s.opts.Now().Sub(part.start)
		}
		if ch.Usage != nil {
			part.usage = *ch.Usage
		}
		data := enc.wire(&ch, req, &usage)
		if data == nil {
			continue
		}
		if !send(data) {
			return
		}
	}
	if usage != nil && req.WantsUsage() {
		send(enc.usage(usage))
	}
}

// withIndex puts "batch_index" first in a JSON object.
func withIndex(obj []byte, i int) []byte {
	obj = bytes.TrimSpace(obj)
	head := `{"batch_index":` + strconv.Itoa(i)
	if len(obj) < 2 || obj[0] != '{' {
		return obj
	}
	if rest := bytes.TrimSpace(obj[1:]); len(rest) > 0 && rest[0] == '}' {
		return []byte(head + "}")
	}
	return append([]byte(head+","), obj[1:]...)
}
