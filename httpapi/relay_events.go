package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/sse"
)

// openSSE starts a streamed answer: the status and the SSE headers. The call has left the
// queue: the headers (X-Gateway-Queue-Ms among them) go out now, unless the first chunk is
// already here to carry them, so a client can tell a call still queued from one whose backend
// is slow to its first token (the console's "queued in the gateway" and "generating"). It
// reports false, noting it, when the client is gone.
func openSSE(w http.ResponseWriter, st llm.Stream, rec *record) bool {
	sse.SetHeaders(w.Header())
	w.WriteHeader(http.StatusOK)
	if hint, _ := st.(buffered); hint == nil || !hint.Buffered() {
		if http.NewResponseController(w).Flush() != nil {
			rec.clientGone = true
			return false
		}
	}
	return true
}

// eventOut is a streamed answer's SSE events on their way to the client: a call's own
// answer (rw), or a batch member's part of its batch's (part). Writing an event does not
// flush it: the relay flushes when nothing more is ready to go. It notes a failed write or
// flush (the client is gone) and whether anything was written since the last flush.
type eventOut struct {
	rw      http.ResponseWriter
	part    *memberOut
	w       *sse.Writer
	gone    bool // a write or a flush failed
	pending bool // events written since the last flush
}

// init readies o to write to w. The SSE Writer writes through o, which hides w's Flusher
// from it, so that it does not flush each event itself.
func (o *eventOut) init(w http.ResponseWriter) {
	o.rw, o.w = w, sse.NewWriter(o)
}

// initPart readies o to write a batch member's events to its part of the batch's answer.
func (o *eventOut) initPart(part *memberOut) {
	o.part, o.w = part, sse.NewWriter(o)
}

// Write writes to the client, or to the member's part: the SSE Writer's way out.
func (o *eventOut) Write(p []byte) (int, error) {
	if o.part != nil {
		return o.part.Write(p)
	}
	return o.rw.Write(p)
}

// event writes one event: data under the name (none when empty). A batch member's carries
// its batch_index.
func (o *eventOut) event(name string, data []byte) error {
	if o.part != nil {
		data = withIndex(data, o.part.index)
	}
	if err := o.w.Event(name, data); err != nil {
		o.gone = true
		return err
	}
	o.pending = true
	return nil
}

// emit writes one event with v, one of the format's own wire types, as its JSON data.
func (o *eventOut) emit(name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err // our own types: a bug, reported as an undecodable chunk would be
	}
	return o.event(name, b)
}

// flush sends what was written since the last flush.
func (o *eventOut) flush() error {
	if !o.pending {
		return nil
	}
	o.pending = false
	var err error
	if o.part != nil {
		err = o.part.flush()
	} else {
		err = http.NewResponseController(o.rw).Flush()
	}
	if err != nil {
		o.gone = true
		return err
	}
	return nil
}

// emitFunc writes one SSE event with v as its JSON data.
type emitFunc func(name string, v any) error
