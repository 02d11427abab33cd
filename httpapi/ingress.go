package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/julienschmidt/httprouter"

	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/wirejson"
)

// ingress is a wire format served beside chat (SPEC §13): how it reads a request, answers a
// call that started and reports an error in its own shape. Everything else — priority, body
// limit, admission, the SPEC §3 headers, the relay's rules (relay.go), the log line — is the
// same for every format.
type ingress struct {
	route string // the route's pattern, for logs, metrics and spans
	// native is the format of a backend's answer relayed to the client as it came: a whole
	// answer (a Complete chunk) of that Format, or, for a format other than chat, the
	// backend's own stream events.
	native llm.Format
	// terminal are the native stream events that end a stream.
	terminal map[string]bool
	// parse decodes and validates a body; r gives the format's own headers.
	parse func(body []byte, r *http.Request) (*parsed, *apiError)
	// fail writes an error answer before anything else was written.
	fail func(w http.ResponseWriter, a apiError)
	// answer is the format's answer to the call p that started, which the relay writes.
	answer func(s *Server, p *parsed, rec *record) answerFormat
}

// parsed is a request an ingress format has read: the chat request the call is made with,
// and what the format's answer needs of the client's request beyond it, decoded once, with
// the rest.
type parsed struct {
	req  *llm.Request
	echo *respEcho // Responses: what every response object repeats of the request; nil otherwise
}

// serve is the handler of one ingress format.
//
// It runs on the HTTP server's connection goroutine, and so do the admission and the
// backend call below it: reading the request, making the call and answering a failure are
// calls of their own so that no frame holds the locals of another step while the call is
// held. That keeps a held non-streaming call's goroutine in its first 8 KiB of stack, as a
// bare proxy's; a stream's still grows past it at its first flush (docs/benchmarks.md).
func (s *Server) serve(in *ingress) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
		claimLog(w)
		rec := &record{start: s.opts.Now(), id: requestID(r.Context()), route: in.route}
		r, rec.span = s.startSpan(r, in.route)
		defer s.logChat(rec)
		if p, prio, ok := s.request(w, r, in, rec); ok {
			s.call(w, r, in, p, prio, rec)
		}
	}
}

// request reads and parses the request of format in, or answers why it cannot.
func (s *Server) request(w http.ResponseWriter, r *http.Request, in *ingress, rec *record) (*parsed, llm.Priority, bool) {
	prio, body, aerr := s.readRequest(w, r)
	var p *parsed
	if aerr == nil {
		p, aerr = in.parse(body, r)
	}
	if aerr == nil {
		prio, aerr = s.clientGate(r.Context(), rec, []string{p.req.Model}, prio)
	}
	if aerr != nil {
		invalidRequest(w, in, aerr, rec)
		return nil, prio, false
	}
	req := p.req
	req.Task = r.Header.Get("X-Gateway-Task")
	req.Conversation = conversationOf(r.Header, req.Conversation, req.User)
	rec.model, rec.prio, rec.stream = req.Model, prio, req.Stream
	s.describeRequest(rec.span, req, prio)
	return p, prio, true
}

// invalidRequest answers a request that could not be read or parsed with a, in format in.
func invalidRequest(w http.ResponseWriter, in *ingress, a *apiError, rec *record) {
	rec.fail(*a)
	w.Header().Set("X-Gateway-Queue-Ms", "0")
	in.fail(w, *a)
}

// call makes the call p.req and relays its answer, or the failure that ended it.
func (s *Server) call(w http.ResponseWriter, r *http.Request, in *ingress, p *parsed, prio llm.Priority, rec *record) {
	st := s.start(w, r, in, p.req, prio, rec)
	if st == nil {
		return
	}
	defer func() {
		if cerr := st.Close(); cerr != nil && rec.code == "" {
			s.opts.Logger.Debug().Err(cerr).Str("request_id", rec.id).Msg("closing backend stream")
		}
	}()
	s.relay(s.writeDeadlines(w), r, in, st, p, rec)
}

// start admits the call req and notes how it was served; a call that does not start is
// answered here, and start returns nil. Apart from call, its frame is gone by the time the
// relay writes the answer's headers, the deepest point of a stream (docs/benchmarks.md).
func (s *Server) start(w http.ResponseWriter, r *http.Request, in *ingress, req *llm.Request, prio llm.Priority, rec *record) llm.Stream {
	admitAt := s.opts.Now()
	sv, err := s.opts.Gateway.Start(r.Context(), req.Model, prio, req)
	s.queueSpan(r.Context(), admitAt, &sv, err)
	rec.served(&sv)
	servedHeaders(w.Header(), &sv)
	if err != nil {
		s.fail(w, r, in, err, rec)
		return nil
	}
	return sv.Stream
}

// servedHeaders sets the SPEC §3 headers every chat answer carries: the queue wait, and the
// model that served the call with the backend attempts it took (when a model was chosen).
func servedHeaders(h http.Header, sv *llm.Served) {
	h.Set("X-Gateway-Queue-Ms", strconv.FormatInt(sv.QueueWait.Milliseconds(), 10))
	if sv.Model != "" {
		h.Set("X-Gateway-Model", sv.Model)
		h.Set("X-Gateway-Attempts", strconv.Itoa(sv.Attempts))
	}
}

// fail answers a call that did not start with err, in format in.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, in *ingress, err error, rec *record) {
	if a, ok := s.answerError(r, err, rec); ok {
		in.fail(w, a)
	}
}

// decodeObject decodes a request body that must be one JSON object into v and returns the
// body trimmed of surrounding white space: JSON's own (RFC 8259 §2), not Unicode's, which
// would take a form feed or a no-break space around the object for valid JSON. Errors name
// the field whose type is wrong.
func decodeObject(body []byte, v any) ([]byte, *apiError) {
	trimmed := bytes.Trim(body, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, notObject(trimmed)
	}
	if err := json.Unmarshal(trimmed, v); err != nil {
		return nil, decodeError(err)
	}
	return trimmed, nil
}

// rawValue is a JSON value a request's decoder leaves for later, as json.RawMessage does, but
// without a copy: json.Unmarshal hands UnmarshalJSON a slice of the very input it decodes,
// and a request's body is never changed after it is read, for as long as the request lives.
// A coding agent's contents are whole files, and a copy of each would hold the body twice
// while the request is translated. Only for json.Unmarshal of a body: a json.Decoder reuses
// its buffer.
type rawValue []byte

// UnmarshalJSON keeps b, the value's text in the body.
func (r *rawValue) UnmarshalJSON(b []byte) error {
	*r = b
	return nil
}

// stringValue is what json.Unmarshal would put in a string from raw, a value the request's
// decoder has checked (a rawValue or json.RawMessage it filled): the text of a JSON string,
// "" for null; ok is false for every other value. The Responses and Messages forms hold a
// string or an array in many places, and a coding agent's contents are whole files: this asks
// which one without a json.Unmarshal that checks the whole value again and then fails on an
// array.
func stringValue(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if string(raw) == "null" {
		return "", true
	}
	return wirejson.String(raw)
}

// notObject is the error for a trimmed request body that does not start a JSON object.
func notObject(trimmed []byte) *apiError {
	if len(trimmed) == 0 || !json.Valid(trimmed) {
		a := invalid("", "request body is not valid JSON: expected a JSON object")
		return &a
	}
	a := invalid("", "request body must be a JSON object")
	return &a
}

// decodeError is the error for a request body json.Unmarshal refused with err. It is apart
// from decodeObject, which stays a small frame above the decoder on the HTTP server's
// connection goroutine (docs/benchmarks.md).
func decodeError(err error) *apiError {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	var a apiError
	switch {
	case errors.As(err, &te) && te.Field != "":
		a = typeMismatch(te) // the JSON type wanted, never the Go type
	case errors.As(err, &se):
		a = invalid("", fmt.Sprintf("request body is not valid JSON: %v (at byte %d)", se, se.Offset))
	default:
		a = invalid("", "request body: "+err.Error())
	}
	return &a
}

// invalidf is invalid with a formatted message.
func invalidf(param, format string, args ...any) *apiError {
	a := invalid(param, fmt.Sprintf(format, args...))
	return &a
}

// checkRange refuses a number outside [lo, hi] (hi < lo: no upper bound), naming the field.
func checkRange(param string, v *float64, lo, hi float64) *apiError {
	switch {
	case v == nil:
		return nil
	case *v < lo || (hi >= lo && *v > hi):
		if hi < lo {
			return invalidf(param, "%s must be at least %g, got %g", param, lo, *v)
		}
		return invalidf(param, "%s must be between %g and %g, got %g", param, lo, hi, *v)
	}
	return nil
}

// firstError returns the first non-nil error.
func firstError(errs ...*apiError) *apiError {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
