package httpapi

import (
	"encoding/json"
	"sort"
	"strings"
)

// nativeResponse is what a backend's own Responses stream has said so far: the response
// object of its last lifecycle event and the output items it has begun, with the text their
// deltas carried. A response.failed that Tollgate writes after them is that response, failed:
// the same id and model and the output streamed so far, as a client that checks a stream's
// identity (openai-node's responses.stream) requires.
type nativeResponse struct {
	base  map[string]json.RawMessage // nil until a lifecycle event came
	items map[int]*nativeItem        // by output_index
}

// nativeItem is one output item of a native stream.
type nativeItem struct {
	raw   json.RawMessage          // as added, or as done
	done  bool                     // raw is the finished item
	parts map[int]*strings.Builder // unfinished: text by content or summary index
	args  strings.Builder          // unfinished: a function call's arguments
}

// nativeEvent is the part of a backend's event the record reads.
type nativeEvent struct {
	Response     json.RawMessage `json:"response"`
	OutputIndex  *int            `json:"output_index"`
	ContentIndex int             `json:"content_index"`
	SummaryIndex int             `json:"summary_index"`
	Item         json.RawMessage `json:"item"`
	Delta        string          `json:"delta"`
}

// note records one event of a backend's stream; events it does not read are skipped
// without being decoded.
func (n *nativeResponse) note(name string, raw []byte) {
	var part bool
	switch name {
	case "response.created", "response.in_progress", "response.queued",
		"response.output_item.added", "response.output_item.done", "response.function_call_arguments.delta":
	case "response.output_text.delta", "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
		part = true
	default:
		return
	}
	var ev nativeEvent
	if json.Unmarshal(raw, &ev) != nil {
		return // relayed as it came; a failure written after it says less
	}
	if len(ev.Response) > 0 {
		var base map[string]json.RawMessage
		if json.Unmarshal(ev.Response, &base) == nil && base != nil {
			n.base = base
		}
		return
	}
	if ev.OutputIndex == nil {
		return
	}
	if n.items == nil {
		n.items = map[int]*nativeItem{}
	}
	it := n.items[*ev.OutputIndex]
	switch {
	case len(ev.Item) > 0:
		n.items[*ev.OutputIndex] = &nativeItem{raw: ev.Item, done: name == "response.output_item.done"}
	case it == nil || it.done:
	case part:
		i := ev.ContentIndex
		if name != "response.output_text.delta" {
			i = ev.SummaryIndex
		}
		if it.parts == nil {
			it.parts = map[int]*strings.Builder{}
		}
		if it.parts[i] == nil {
			it.parts[i] = &strings.Builder{}
		}
		it.parts[i].WriteString(ev.Delta)
	default:
		it.args.WriteString(ev.Delta)
	}
}

// failed is the backend's response, failed with e, and its output so far; nil before the
// backend named its response.
func (n *nativeResponse) failed(e *respError) json.RawMessage {
	if n.base == nil {
		return nil
	}
	o := make(map[string]any, len(n.base)+3)
	for k, v := range n.base {
		o[k] = v
	}
	idx := make([]int, 0, len(n.items))
	for i := range n.items {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	output := make([]json.RawMessage, 0, len(idx))
	for _, i := range idx {
		output = append(output, n.items[i].json())
	}
	o["status"], o["error"], o["output"] = "failed", e, output
	b, err := json.Marshal(o)
	if err != nil {
		return nil
	}
	return b
}

// json is the item as far as it got: a finished one as the backend wrote it, an unfinished
// one incomplete, with the text and arguments its deltas carried.
func (it *nativeItem) json() json.RawMessage {
	if it.done {
		return it.raw
	}
	var o map[string]json.RawMessage
	if json.Unmarshal(it.raw, &o) != nil || o == nil {
		return it.raw
	}
	var typ string
	_ = json.Unmarshal(o["type"], &typ)
	set := func(k string, v any) {
		if b, err := json.Marshal(v); err == nil {
			o[k] = b
		}
	}
	if _, ok := o["status"]; ok || typ == "message" {
		set("status", "incomplete")
	}
	switch typ {
	case "message":
		set("content", it.textParts(outputTextPart))
	case "reasoning":
		set("summary", it.textParts(summaryText))
	case "function_call":
		set("arguments", it.args.String())
	}
	b, err := json.Marshal(o)
	if err != nil {
		return it.raw
	}
	return b
}

// textParts is the item's streamed text as parts, in index order.
func (it *nativeItem) textParts(part func(string) *respPart) []*respPart {
	idx := make([]int, 0, len(it.parts))
	for i := range it.parts {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	out := make([]*respPart, 0, len(idx))
	for _, i := range idx {
		out = append(out, part(it.parts[i].String()))
	}
	return out
}
