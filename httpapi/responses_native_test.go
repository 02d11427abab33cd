package httpapi

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// FuzzNativeFailed: whatever events a backend's Responses stream carried, the response.failed
// written after them is either Tollgate's own (nil here: no response named yet) or the
// backend's response as valid JSON, failed, with the id it was created with and one output
// entry per output index begun.
func FuzzNativeFailed(f *testing.F) {
	f.Add("response.created {\"response\":{\"id\":\"resp_1\",\"model\":\"m\",\"output\":[]}}\n" +
		"response.output_item.added {\"output_index\":0,\"item\":{\"id\":\"msg_1\",\"type\":\"message\",\"content\":[]}}\n" +
		"response.output_text.delta {\"output_index\":0,\"content_index\":0,\"delta\":\"Hi\"}")
	f.Add("response.output_item.added {\"output_index\":3,\"item\":{\"type\":\"function_call\",\"arguments\":\"\"}}\n" +
		"response.function_call_arguments.delta {\"output_index\":3,\"delta\":\"{\"}\n" +
		"response.in_progress {\"response\":{\"id\":\"r\"}}")
	f.Add("response.created {\"response\":{\"id\":\"&<\",\"x\":[]}}")
	f.Add("response.created {\"response\":null}\nresponse.output_item.done {\"output_index\":-1,\"item\":[1]}")
	f.Fuzz(func(t *testing.T, transcript string) {
		var n nativeResponse
		var id json.RawMessage
		indexes := map[int]bool{}
		for line := range strings.Lines(transcript) {
			name, raw, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
			n.note(name, []byte(raw))
			if n.base != nil {
				id = n.base["id"]
			}
			for i := range n.items {
				indexes[i] = true
			}
		}
		b := n.failed(&respError{Code: "upstream_error", Message: "m"})
		if b == nil {
			if n.base != nil {
				t.Fatalf("a named response gave no failed one")
			}
			return
		}
		var got struct {
			ID     json.RawMessage   `json:"id"`
			Status string            `json:"status"`
			Output []json.RawMessage `json:"output"`
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("failed response is not JSON: %v: %s", err, b)
		}
		if got.Status != "failed" || !sameJSON(got.ID, id) || len(got.Output) != len(indexes) {
			t.Fatalf("failed response %s: want status failed, id %s, %d outputs", b, id, len(indexes))
		}
	})
}

// sameJSON reports whether a and b are the same JSON value, however escaped.
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return len(a) == 0 && len(b) == 0
	}
	return reflect.DeepEqual(x, y)
}
