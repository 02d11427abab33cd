package openai

import (
	"encoding/json"

	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/upstream"
)

// The top-level keys of a Responses event that responsesEvent decodes, in eventKeys' order.
const (
	keyType = iota
	keyCode
	keyMessage
	keyDelta
	keyResponse
	nEventKeys
)

var eventKeys = [nEventKeys]string{"type", "code", "message", "delta", "response"}

// decodeEvent decodes a Responses stream event into ev, which it overwrites, as
// json.Unmarshal into a zero responsesEvent would: the same event and an error exactly when
// that gives one, in one pass over the event (upstream.Scan) and a decode of its
// response object, which only the events that start and end a response carry. A delta event
// decoded whole cost as much as the rest of relaying it (docs/benchmarks.md), and a stream is
// mostly deltas. An event whose keys only encoding/json's own rules read as it does (a key
// with an escape, in another case, or twice), or whose values are not what the fields take,
// is decoded by encoding/json; FuzzEvent holds the two to each other.
func decodeEvent(data []byte, ev *responsesEvent) error {
	var at [nEventKeys]upstream.Member
	odd := len(data) == 0 || data[0] != '{'
	ok := upstream.Scan(data, func(m upstream.Member) {
		if m.Depth != 1 || odd {
			return
		}
		key := data[m.Key:m.KeyEnd]
		k := eventKey(key)
		switch {
		case m.Escaped:
			odd = true
		case k >= 0 && at[k].Key == 0:
			at[k] = m
		case k >= 0 || foldsTo(key, eventKeys[:]...):
			odd = true // twice, or another spelling encoding/json would take
		}
	})
	if !ok || odd {
		return json.Unmarshal(data, ev)
	}
	var e responsesEvent
	for k, s := range []*string{&e.Type, &e.Code, &e.Message, &e.Delta} {
		if m := at[k]; m.Key != 0 {
			v := data[m.At:m.End]
			if string(v) == "null" {
				continue
			}
			text, ok := llm.StringValue(v)
			if !ok {
				return json.Unmarshal(data, ev) // not a string: encoding/json's error
			}
			*s = text
		}
	}
	if m := at[keyResponse]; m.Key != 0 {
		if err := json.Unmarshal(data[m.At:m.End], &e.Response); err != nil {
			return json.Unmarshal(data, ev) // its error, with the field's path
		}
	}
	*ev = e
	return nil
}

// eventKey is the index of key among eventKeys, written exactly; -1 when it is none of them.
func eventKey(key []byte) int {
	for k, name := range eventKeys {
		if string(key) == name {
			return k
		}
	}
	return -1
}
