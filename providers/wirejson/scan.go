package wirejson

import (
	"bytes"
	"errors"
	"io"

	"github.com/go-json-experiment/json/jsontext"
)

// Member is one object member Scan saw: its depth (how many objects and arrays hold it, 1 for
// the members of a top-level object), its name, and where its value lies in the input
// (b[At:End]). Name is the input's own bytes between the quotes, or, when they hold an escape
// or bytes that are not UTF-8, a decoded copy.
type Member struct {
	Depth   int
	Name    []byte
	At, End int
}

// Valid reports whether b is one JSON value with no object naming a member twice.
func Valid(b []byte) bool { return scan(b, nil, false) }

// Scan reports whether b is the backend's JSON that Valid takes, and shows visit every object
// member once its value is checked, in the same pass: members of one object in document
// order, each after the members nested in its value. It lets a relay find the names it looks
// for in the pass that checks the frame. What visit saw of an invalid b means nothing.
func Scan(b []byte, visit func(Member)) bool { return scan(b, visit, false) }

// Members lists the top-level members of the JSON object obj, a client's body, read as
// encoding/json v1 reads it (duplicate names included); the error says what is wrong and
// where when obj is not a JSON object.
func Members(obj []byte) ([]Member, error) {
	out := make([]Member, 0, 8)
	valid := scan(obj, func(m Member) {
		if m.Depth == 1 {
			out = append(out, m)
		}
	}, true)
	if !valid {
		if err := decodeError(obj, client); err != nil {
			return nil, err
		}
		return nil, errors.New("not valid JSON")
	}
	if bytes.TrimLeft(obj, " \t\r\n")[0] != '{' {
		return nil, errors.New("not a JSON object")
	}
	return out, nil
}

// ErrDuplicateName is in the error Check gives for JSON that names a member twice in one
// object (errors.Is).
var ErrDuplicateName = jsontext.ErrDuplicateName

// Check is Valid's verdict with its reason: nil, or what is wrong with b and where.
func Check(b []byte) error {
	if Valid(b) {
		return nil
	}
	if err := decodeError(b, backend); err != nil {
		return err
	}
	return errors.New("not valid JSON")
}

// Cut reports whether b starts with a JSON value that stops before its end (what a backend
// that closed its connection cleanly in the middle of an answer leaves), as distinct from
// JSON that is whole or broken in another way.
func Cut(b []byte) bool {
	if scan(b, nil, true) {
		return false
	}
	_, err := jsontext.NewDecoder(bytes.NewReader(b), client).ReadValue()
	return errors.Is(err, io.ErrUnexpectedEOF)
}

// decodeError is what jsontext's decoder says is wrong with b, one JSON value read with
// opts; nil when it finds nothing wrong. It is for input the validator refused, to say why.
func decodeError(b []byte, opts jsontext.Options) error {
	d := jsontext.NewDecoder(bytes.NewReader(b), opts)
	if _, err := d.ReadValue(); err != nil {
		if err == io.EOF {
			return io.ErrUnexpectedEOF
		}
		return err
	}
	if _, err := d.ReadToken(); err != io.EOF {
		if err == nil {
			return errors.New("data after the JSON value")
		}
		return err
	}
	return nil
}
