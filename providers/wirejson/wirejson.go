// Package wirejson is the one place the gateway tokenizes JSON on a call's path: a backend's
// stream frames and whole answers, and the members of a client's request body the gateway
// rewrites. Its own validator (Valid, Scan, Members) checks each frame and finds its members
// in one pass; whatever is decoded is decoded by encoding/json/v2 and jsontext
// (github.com/go-json-experiment/json), which no other package of the gateway imports.
//
// A backend's JSON (Valid, Scan, Unmarshal) is read as I-JSON (RFC 7493) reads names: a
// member's name is its text with escapes decoded, matched exactly (never without regard to
// case, as encoding/json v1 does), and an object that names a member twice is not JSON the
// gateway accepts. Bytes that are not UTF-8 are let through as before (decoded text holds
// U+FFFD in their place): backends have sent them, and refusing a frame for them would end
// a stream that encoding/json used to relay.
//
// A client's body (Members) is read as encoding/json v1 reads it, duplicate names included,
// since the ingress decodes it with v1 and a client's request must mean the same to both.
// String decodes one string literal, from either side, as encoding/json does. Encode writes a
// request for a backend byte for byte as encoding/json does, in one buffer (encode.go).
package wirejson

import (
	"bytes"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

var (
	// backend is how a backend's JSON is read: jsontext's defaults (exact names, duplicate
	// names refused, encoding/json's nesting limit of 10,000) with bytes that are not UTF-8
	// let through.
	backend = jsontext.AllowInvalidUTF8(true)
	// client is how a client's body is read: as encoding/json v1 takes its syntax.
	client = json.JoinOptions(jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true))
)

// Unmarshal decodes the backend's JSON b into v with encoding/json/v2: names matched exactly,
// b refused (a *jsontext.SyntacticError) when it is not JSON or an object in it names a member
// twice. Types that have an UnmarshalJSON method (json.RawMessage among them) are decoded by it.
func Unmarshal(b []byte, v any) error { return json.Unmarshal(b, v, backend) }

// String returns the text of lit, one JSON string literal and nothing around it, as
// encoding/json decodes it (escapes resolved; a lone UTF-16 surrogate and every byte that is
// not UTF-8 replaced by U+FFFD); ok is false when lit is anything else.
func String(lit []byte) (s string, ok bool) {
	if len(lit) < 2 || lit[0] != '"' || lit[len(lit)-1] != '"' {
		return "", false
	}
	if i := bytes.IndexByte(lit[1:], '"'); i == len(lit)-2 && verbatim(lit[1:i+1]) {
		return string(lit[1 : len(lit)-1]), true // nothing to decode, as is usual
	}
	// One pass that checks and decodes; it fails on a lone surrogate or a byte that is not
	// UTF-8 too, which the decode below replaces, as encoding/json does.
	if text, err := jsontext.AppendUnquote(make([]byte, 0, len(lit)), lit); err == nil {
		return string(text), true
	}
	if json.Unmarshal(lit, &s, client) != nil {
		return "", false
	}
	return s, true
}

// verbatim reports whether text is printable ASCII without a backslash: it stands for itself.
func verbatim(text []byte) bool {
	for _, c := range text {
		if c < ' ' || c == '\\' || c >= 0x80 {
			return false
		}
	}
	return true
}
