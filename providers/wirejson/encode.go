package wirejson

import (
	"bytes"
	stdjson "encoding/json"
	"errors"
	"slices"
	"sync"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/tollgate/tollgate/providers/llm"
)

var (
	// v1 is how Encode writes: encoding/json's rules without HTML escaping, as an Encoder with
	// SetEscapeHTML(false) writes, except that a string that is not UTF-8 is an error (as
	// jsontext reports it, which Encode recognises) where encoding/json writes \ufffd.
	v1 = json.JoinOptions(jsonv1.DefaultOptionsV1(), jsontext.EscapeForHTML(false),
		jsontext.AllowInvalidUTF8(false), jsonv1.ReportErrorsWithLegacySemantics(false))
	// errInvalidUTF8 is jsontext's error for a string that is not UTF-8.
	_, errInvalidUTF8 = jsontext.AppendQuote(nil, "\xff")
)

// Encode returns v's JSON byte for byte as an encoding/json Encoder with SetEscapeHTML(false)
// writes it, without the newline, built in one buffer; size is about how long it will be
// (the client's body, for a translated request), 0 when unknown.
//
// encoding/json writes an llm.Content through its MarshalJSON, which builds the text (a
// coding agent's whole files) in an encode buffer of its own grown by appending, copies it
// out, into the outer buffer and from there into the body, and keeps both encode buffers
// pooled. Encode writes each Content in place and then HTML-escapes it there, as its
// MarshalJSON (json.Marshal) does. A string that is not UTF-8 (only a client's raw bytes
// bring one) is left to encoding/json.
func Encode(v any, size int) ([]byte, error) {
	w := contentWriters.Get().(*contentWriter)
	defer contentWriters.Put(w)
	w.spans = w.spans[:0]
	b, err := encode(v, size, w.opts)
	switch {
	case errors.Is(err, errors.Unwrap(errInvalidUTF8)):
		var buf bytes.Buffer
		enc := stdjson.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		err = enc.Encode(v)
		return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), err
	case err != nil:
		return nil, err
	}
	return w.spans.escapeHTML(b), nil
}

// encode writes v with opts into a buffer of size and a quarter more: jsontext keeps a
// quarter of a bytes.Buffer free, doubling the buffer when less is, and the HTML escapes go
// in that quarter.
func encode(v any, size int, opts json.Options) ([]byte, error) {
	var b bytes.Buffer
	b.Grow(size + size/4)
	if err := json.MarshalWrite(&b, v, opts); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// contentWriter is the marshaler of llm.Content for one Encode at a time and the spans it
// wrote. It is pooled so that jsontext's cache of how its options marshal each type is not
// built again for every request.
type contentWriter struct {
	opts  json.Options
	spans spans
}

var contentWriters = sync.Pool{New: func() any {
	w := new(contentWriter)
	w.opts = json.JoinOptions(v1, json.WithMarshalers(json.MarshalToFunc(w.spans.write)))
	return w
}}

// spans are where the contents lie in the output, in order: [start, end) offsets.
type spans [][2]int64

// write writes c, as text or parts, and notes where it lies.
func (s *spans) write(enc *jsontext.Encoder, c llm.Content) error {
	start := enc.OutputOffset()
	var err error
	if c.Parts != nil {
		err = json.MarshalEncode(enc, c.Parts)
	} else {
		err = enc.WriteToken(jsontext.String(c.Text))
	}
	*s = append(*s, [2]int64{start, enc.OutputOffset()})
	return err
}

// escapeHTML rewrites each '<', '>' and '&' within the spans of b as \u003c, \u003e and
// \u0026, as encoding/json's HTML escaping does: inside JSON values these bytes are only ever
// characters of strings. It moves bytes towards the end, in b's spare capacity when it has
// room, from the last escape to the first.
func (s spans) escapeHTML(b []byte) []byte {
	const html = "<>&"
	extra := 0
	for _, sp := range s {
		for _, c := range []byte(html) {
			extra += 5 * bytes.Count(b[sp[0]:sp[1]], []byte{c})
		}
	}
	if extra == 0 {
		return b
	}
	end := len(b) // b[end:] has moved to b[w:]
	b = slices.Grow(b, extra)[:end+extra]
	w := len(b)
	move := func(from int, text []byte) {
		w -= copy(b[w-len(text):w], text)
		end = from
	}
	for i := len(s) - 1; i >= 0; i-- {
		from, to := int(s[i][0]), int(s[i][1])
		move(to, b[to:end])
		for j := bytes.LastIndexAny(b[from:end], html); j >= 0; j = bytes.LastIndexAny(b[from:end], html) {
			j += from
			move(j+1, b[j+1:end])
			move(j, []byte(htmlEscape(b[j])))
		}
		move(from, b[from:end])
	}
	return b // w == end: the bytes before the first content did not move
}

// htmlEscape is encoding/json's escape of an HTML character.
func htmlEscape(c byte) string {
	switch c {
	case '<':
		return `\u003c`
	case '>':
		return `\u003e`
	}
	return `\u0026`
}
