package wirejson

import (
	"bytes"
	stdjson "encoding/json"
	"errors"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/tollgate/tollgate/providers/llm"
)

var (
	// v1 is encoding/json's rules, except that a string that is not UTF-8 is an error (which
	// Encode recognises: errors as jsontext reports them) where encoding/json writes \ufffd.
	v1 = json.JoinOptions(jsonv1.DefaultOptionsV1(), jsontext.AllowInvalidUTF8(false),
		jsonv1.ReportErrorsWithLegacySemantics(false))
	// request is how Encode writes a value: encoding/json's rules (jsonv1.DefaultOptionsV1)
	// without HTML escaping, as an Encoder with SetEscapeHTML(false) writes, and each
	// llm.Content in place.
	request = json.JoinOptions(v1, jsontext.EscapeForHTML(false), json.WithMarshalers(json.MarshalToFunc(content)))
	// contentText is how a content's value is written: as json.Marshal writes it inside
	// llm.Content's MarshalJSON, HTML escaped.
	contentText = v1
	// errInvalidUTF8 is jsontext's error for a string that is not UTF-8.
	_, errInvalidUTF8 = jsontext.AppendQuote(nil, "\xff")
)

// Encode returns v's JSON byte for byte as an encoding/json Encoder with SetEscapeHTML(false)
// writes it, without the newline, built in one buffer; size is about how long it will be
// (the client's body for a translated request), 0 when unknown.
//
// encoding/json builds an llm.Content's text (a coding agent's whole files) in an encode
// buffer of its own, grown by appending, copies it out, copies that into the outer buffer
// and keeps both buffers pooled; here the text is written once into a scratch buffer and
// once into the request. A string that is not UTF-8 (only a client's raw bytes bring one) is
// left to encoding/json, which writes its bad bytes as \ufffd where jsontext writes U+FFFD.
func Encode(v any, size int) ([]byte, error) {
	b, err := encode(v, size, request)
	if errors.Is(err, errors.Unwrap(errInvalidUTF8)) {
		var buf bytes.Buffer
		enc := stdjson.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		err = enc.Encode(v)
		b = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	}
	return b, err
}

// encode writes v with opts into a buffer of size and a quarter more: jsontext keeps a
// quarter of a bytes.Buffer free, doubling it when less is.
func encode(v any, size int, opts json.Options) ([]byte, error) {
	var b bytes.Buffer
	b.Grow(size + size/4)
	if err := json.MarshalWrite(&b, v, opts); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// content writes c as its MarshalJSON does, HTML escaped, which one encoder's options cannot
// mix with the rest of a request: into a scratch buffer, then into enc.
func content(enc *jsontext.Encoder, c llm.Content) error {
	var v any = c.Text
	size := len(c.Text)
	if c.Parts != nil {
		v = c.Parts
		for _, p := range c.Parts {
			size += len(p.Text) + 64
			if p.ImageURL != nil {
				size += len(p.ImageURL.URL)
			}
		}
	}
	b, err := encode(v, size+size/8+2, contentText)
	if err != nil {
		return err
	}
	return enc.WriteValue(b)
}
