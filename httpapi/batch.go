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

// wholeMember reads member i to its end through the relay engine (collect): its
// completion, or its error.
func (s *Server) wholeMember(r *http.Request, m llm.BatchMember, req *llm.Request, part *record, i int) batchResult {
	res := batchResult{Model: m.Model, QueueMs: m.QueueWait.Milliseconds()}
	err := m.Err
	if err == nil {
		var a wholeAnswer
		if a, err = s.collect(m.Stream, llm.FormatChat, s.memberAnswer(req, part, i, m.Model).whole(), part, m.Provider); err == nil {
			if res.Completion = a.raw; !a.native {
				res.Completion, err = json.Marshal(a.body)
			}
		}
	}
	if err != nil {
		a := toAPIError(err, s.opts.Gateway.RetryAfter())
		a.retryAfter = 0 // the batch as a whole answers 200: there is nothing to retry after
		part.fail(a)
		d := a.body().Error
		res.Completion, res.Error = nil, &d
	}
	return res
}

// memberAnswer is member i's answer in chat's format: its own id and model.
func (s *Server) memberAnswer(req *llm.Request, part *record, i int, model string) *chatAnswer {
	return &chatAnswer{id: part.id + "-" + strconv.Itoa(i), model: model, req: req, now: s.opts.Now}
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
		if _, err := w.Write(data); err != nil || (len(events) == 0 && rc.Flush() != nil) {
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

// streamMember relays member i's answer through the relay engine (relayEvents) in chat's
// format, every event marked with its batch_index, until it ends or quit. Its stream ends
// with its usage: the batch's one data: [DONE] follows every member's.
func (s *Server) streamMember(r *http.Request, m llm.BatchMember, req *llm.Request, part *record, i int,
	events chan<- []byte, quit <-chan struct{}) {
	sr := &streamRelay{rec: part, in: chatAPI}
	sr.out.initPart(&memberOut{index: i, events: events, quit: quit})
	ans := s.memberAnswer(req, part, i, m.Model)
	ans.stream(&sr.out)
	sr.sink = &memberStream{&ans.streamed}
	if m.Err != nil {
		if a, ok := s.answerError(r, m.Err, part); ok {
			sr.fail(a)
		}
		return
	}
	s.relayEvents(r, m.Stream, sr)
}

// memberStream is a batch member's chat stream, which ends with its usage (chatStream.tail):
// its batch writes the one data: [DONE].
type memberStream struct{ *chatStream }

func (m *memberStream) end() error { return m.tail() }

// memberOut is a streamed batch member's part of its batch's answer: its SSE events, held
// until the relay flushes them, then handed to the batch's writer as one write.
type memberOut struct {
	index  int
	buf    []byte
	events chan<- []byte
	quit   <-chan struct{}
}

func (m *memberOut) Write(p []byte) (int, error) {
	m.buf = append(m.buf, p...)
	return len(p), nil
}

// errBatchGone is a member's flush once its batch's client is gone.
var errBatchGone = errors.New("the batch's client is gone")

// flush hands the held events to the batch's writer, which owns them from then on.
func (m *memberOut) flush() error {
	select {
	case m.events <- m.buf:
		m.buf = nil
		return nil
	case <-m.quit:
		return errBatchGone
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
