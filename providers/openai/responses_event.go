package openai

import "github.com/tollgate/tollgate/providers/wirejson"

// decodeEvent decodes a Responses stream event into ev, which it overwrites: names as
// written, none twice (wirejson.Unmarshal); the response object only the events that start
// and end a response carry.
func decodeEvent(data []byte, ev *responsesEvent) error {
	*ev = responsesEvent{}
	return wirejson.Unmarshal(data, ev)
}
