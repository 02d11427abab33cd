package httpapi

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/providers/llm"
)

// responsesAnswer turns a chat answer (structured or OpenAI-compatible chunks) into a
// Responses answer: output items in the order they begin — a reasoning item, a message, a
// function call per tool call — each announced, streamed and closed with the events Codex and
// the SDKs read, then the response with its usage. With emit nil it only assembles the items,
// for a non-streaming answer.
//
// A reasoning or message item ends when another item begins. Function calls stay open until
// the answer ends: a chat backend may interleave the fragments of parallel calls, and every
// Responses event names the item it belongs to.
type responsesAnswer struct {
	emit    emitFunc // nil: no stream
	id      string
	model   string
	created int64
	custom  map[string]bool // chat function names that stand for custom tools
	echo    *respEcho       // what every response object repeats of the request
	native  nativeResponse  // a backend's own stream, as far as it came

	seq    int
	items  []*respItem
	open   *respItem         // the reasoning or message item being written, if any
	calls  map[int]*respItem // function calls by chat tool call index
	usage  *llm.Usage
	finish llm.FinishReason
}

// respItem is one output item being built.
type respItem struct {
	typ       string // reasoning, message, function_call, custom_tool_call
	id        string
	index     int // output_index
	text      strings.Builder
	callID    string
	name      string
	namespace string
	done      bool
}

// newResponsesAnswer is the answer to req; echo nil (a request built in code) repeats every
// field's default.
func newResponsesAnswer(requestID, model string, created int64, req *llm.Request, echo *respEcho) *responsesAnswer {
	if echo == nil {
		echo = newRespEcho(&responsesRequest{})
	}
	a := &responsesAnswer{id: "resp_" + requestID, model: model, created: created, custom: map[string]bool{},
		calls: map[int]*respItem{}, echo: echo}
	tools := req.Tools
	for _, t := range tools {
		if bytes.Equal(t.Function.Parameters, customToolSchema) {
			a.custom[t.Function.Name] = true // a custom tool, translated by chatTool
		}
	}
	return a
}

// event sends one event, numbered.
func (a *responsesAnswer) event(name string, ev respEvent) error {
	if a.emit == nil {
		return nil
	}
	ev.Type, ev.SequenceNumber = name, a.seq
	a.seq++
	return a.emit(name, &ev)
}

// start announces the response.
func (a *responsesAnswer) start() error {
	r := a.object("in_progress", nil)
	if err := a.event("response.created", respEvent{Response: r}); err != nil {
		return err
	}
	return a.event("response.in_progress", respEvent{Response: r})
}

// add takes one chunk of the chat answer.
func (a *responsesAnswer) add(ch *llm.Chunk) error {
	if ch.Raw != nil {
		return structured(ch, a.add) // an OpenAI-compatible backend's chunk
	}
	if ch.Usage != nil {
		a.usage = ch.Usage
	}
	if ch.FinishReason != "" {
		a.finish = ch.FinishReason
	}
	if ch.Index != 0 {
		return nil // a Responses answer has one output: choices beyond the first are dropped
	}
	if ch.ReasoningContent != "" {
		if err := a.reasoning(ch.ReasoningContent); err != nil {
			return err
		}
	}
	if ch.Content != "" {
		if err := a.content(ch.Content); err != nil {
			return err
		}
	}
	for _, t := range ch.ToolCalls {
		if err := a.toolCall(t); err != nil {
			return err
		}
	}
	return nil
}

func (a *responsesAnswer) newItem(typ, id string) *respItem {
	it := &respItem{typ: typ, id: id, index: len(a.items)}
	a.items = append(a.items, it)
	return it
}

func (a *responsesAnswer) reasoning(text string) error {
	if a.open == nil || a.open.typ != "reasoning" {
		if err := a.closeOpen(); err != nil {
			return err
		}
		it := a.newItem("reasoning", "rs_"+a.id[len("resp_"):]+"_"+strconv.Itoa(len(a.items)))
		a.open = it
		if err := a.event("response.output_item.added", respEvent{OutputIndex: &it.index, Item: it.json("in_progress")}); err != nil {
			return err
		}
		if err := a.event("response.reasoning_summary_part.added", respEvent{ItemID: it.id, OutputIndex: &it.index,
			SummaryIndex: new(0), Part: summaryText("")}); err != nil {
			return err
		}
	}
	it := a.open
	it.text.WriteString(text)
	return a.event("response.reasoning_summary_text.delta", respEvent{ItemID: it.id, OutputIndex: &it.index,
		SummaryIndex: new(0), Delta: &text})
}

func (a *responsesAnswer) content(text string) error {
	if a.open == nil || a.open.typ != "message" {
		if err := a.closeOpen(); err != nil {
			return err
		}
		it := a.newItem("message", "msg_"+a.id[len("resp_"):]+"_"+strconv.Itoa(len(a.items)))
		a.open = it
		if err := a.event("response.output_item.added", respEvent{OutputIndex: &it.index, Item: it.json("in_progress")}); err != nil {
			return err
		}
		if err := a.event("response.content_part.added", respEvent{ItemID: it.id, OutputIndex: &it.index,
			ContentIndex: new(0), Part: outputTextPart("")}); err != nil {
			return err
		}
	}
	it := a.open
	it.text.WriteString(text)
	return a.event("response.output_text.delta", respEvent{ItemID: it.id, OutputIndex: &it.index,
		ContentIndex: new(0), Delta: &text})
}

func (a *responsesAnswer) toolCall(t llm.ToolCallDelta) error {
	it, ok := a.calls[t.Index]
	if !ok {
		if err := a.closeOpen(); err != nil {
			return err
		}
		typ := "function_call"
		name, ns := t.Name, ""
		if a.custom[name] {
			typ = "custom_tool_call"
		} else if n, s, found := strings.Cut(name, nsSep); found && s != "" && n != "" {
			ns, name = n, s
		}
		it = a.newItem(typ, "fc_"+a.id[len("resp_"):]+"_"+strconv.Itoa(len(a.items)))
		it.callID, it.name, it.namespace = t.ID, name, ns
		if it.callID == "" {
			it.callID = "call_" + it.id
		}
		a.calls[t.Index] = it
		if err := a.event("response.output_item.added", respEvent{OutputIndex: &it.index, Item: it.json("in_progress")}); err != nil {
			return err
		}
	}
	if t.Arguments == "" {
		return nil
	}
	it.text.WriteString(t.Arguments)
	if it.typ == "custom_tool_call" {
		return nil // its input is the arguments' "input" string, known only once they are whole
	}
	return a.event("response.function_call_arguments.delta", respEvent{ItemID: it.id, OutputIndex: &it.index,
		Delta: &t.Arguments})
}

// closeOpen ends the reasoning or message item being written.
func (a *responsesAnswer) closeOpen() error {
	it := a.open
	if it == nil {
		return nil
	}
	a.open = nil
	it.done = true
	text := it.text.String()
	switch it.typ {
	case "reasoning":
		if err := a.event("response.reasoning_summary_text.done", respEvent{ItemID: it.id, OutputIndex: &it.index,
			SummaryIndex: new(0), Text: &text}); err != nil {
			return err
		}
		if err := a.event("response.reasoning_summary_part.done", respEvent{ItemID: it.id, OutputIndex: &it.index,
			SummaryIndex: new(0), Part: summaryText(text)}); err != nil {
			return err
		}
	case "message":
		if err := a.event("response.output_text.done", respEvent{ItemID: it.id, OutputIndex: &it.index,
			ContentIndex: new(0), Text: &text}); err != nil {
			return err
		}
		if err := a.event("response.content_part.done", respEvent{ItemID: it.id, OutputIndex: &it.index,
			ContentIndex: new(0), Part: outputTextPart(text)}); err != nil {
			return err
		}
	}
	return a.event("response.output_item.done", respEvent{OutputIndex: &it.index, Item: it.json("completed")})
}

// closeCall ends a function call item.
func (a *responsesAnswer) closeCall(it *respItem) error {
	it.done = true
	args := it.text.String()
	if it.typ == "custom_tool_call" {
		input := it.input()
		if err := a.event("response.custom_tool_call_input.delta", respEvent{ItemID: it.id, OutputIndex: &it.index, Delta: &input}); err != nil {
			return err
		}
		if err := a.event("response.custom_tool_call_input.done", respEvent{ItemID: it.id, OutputIndex: &it.index, Input: &input}); err != nil {
			return err
		}
	} else {
		if args == "" {
			args = "{}"
			it.text.WriteString(args)
		}
		if err := a.event("response.function_call_arguments.done", respEvent{ItemID: it.id, OutputIndex: &it.index,
			Arguments: &args}); err != nil {
			return err
		}
	}
	return a.event("response.output_item.done", respEvent{OutputIndex: &it.index, Item: it.json("completed")})
}

// end closes every item and sends the terminal event: response.completed, or
// response.incomplete when the answer was cut (max_output_tokens, a content filter).
func (a *responsesAnswer) end() error {
	if err := a.closeOpen(); err != nil {
		return err
	}
	for _, it := range a.items {
		if !it.done {
			if err := a.closeCall(it); err != nil {
				return err
			}
		}
	}
	status, name := "completed", "response.completed"
	if a.incomplete() != nil {
		status, name = "incomplete", "response.incomplete"
	}
	return a.event(name, respEvent{Response: a.object(status, nil)})
}

// follow takes the sequence number of a backend's own event, relayed as it came, so a
// response.failed written after it comes next in the sequence, and notes what it says of
// the response, so that one is the backend's.
func (a *responsesAnswer) follow(event string, raw []byte) {
	a.native.note(event, raw)
	const key = `"sequence_number":`
	i := bytes.Index(raw, []byte(key))
	if i < 0 {
		return
	}
	rest := bytes.TrimLeft(raw[i+len(key):], " ")
	n := 0
	for len(rest) > 0 && rest[0] >= '0' && rest[0] <= '9' && n < 1<<40 {
		n = n*10 + int(rest[0]-'0')
		rest = rest[1:]
	}
	a.seq = n + 1
}

// fail sends response.failed with the error in Tollgate's vocabulary, Codex reads its code and
// message. After a backend's own events it is the backend's response (its id, model and the
// output it streamed) that failed: a client that checks a stream's identity would take
// Tollgate's own for another response and throw the error away.
func (a *responsesAnswer) fail(e apiError) error {
	re := &respError{Code: e.code, Message: e.message}
	if r := a.native.failed(re); r != nil && a.emit != nil {
		ev := nativeFailed{Type: "response.failed", SequenceNumber: a.seq, Response: r}
		a.seq++
		return a.emit(ev.Type, &ev)
	}
	return a.event("response.failed", respEvent{Response: a.object("failed", re)})
}

// nativeFailed is response.failed with a backend's own response object.
type nativeFailed struct {
	Type           string          `json:"type"`
	SequenceNumber int             `json:"sequence_number"`
	Response       json.RawMessage `json:"response"`
}

func (a *responsesAnswer) incomplete() *respIncomplete {
	switch a.finish {
	case llm.FinishLength:
		return &respIncomplete{Reason: "max_output_tokens"}
	case llm.FinishContentFilter:
		return &respIncomplete{Reason: "content_filter"}
	}
	return nil
}

// object is the response object in its current state.
func (a *responsesAnswer) object(status string, e *respError) *respObject {
	o := &respObject{ID: a.id, Object: "response", CreatedAt: a.created, Status: status, Model: a.model,
		Output: []*respItemJSON{}, Error: e, respEcho: *a.echo}
	if status != "in_progress" {
		for _, it := range a.items {
			o.Output = append(o.Output, it.json(it.status()))
		}
	}
	if status == "completed" || status == "incomplete" {
		o.IncompleteDetails = a.incomplete()
		o.Usage = responsesUsage(a.usage)
	}
	return o
}

// input is a custom tool call's input: the "input" string of its arguments, or the
// arguments themselves when the model wrote something else.
func (it *respItem) input() string {
	var v struct {
		Input *string `json:"input"`
	}
	if json.Unmarshal([]byte(it.text.String()), &v) == nil && v.Input != nil {
		return *v.Input
	}
	return it.text.String()
}

// status is the item's status in a response that ended: completed once its
// output_item.done went out, incomplete when the answer failed before that (a message or a
// tool call cut short), as a backend's own failed response says of its unfinished items.
func (it *respItem) status() string {
	if it.done {
		return "completed"
	}
	return "incomplete"
}

// json is the item in the given status: as just added (in_progress, nothing written yet), or
// with what was written (completed, or incomplete when cut short).
func (it *respItem) json(status string) *respItemJSON {
	j := &respItemJSON{ID: it.id, Type: it.typ}
	text := it.text.String()
	written := status != "in_progress"
	switch it.typ {
	case "reasoning":
		j.Summary = []respPart{}
		if written {
			j.Summary = append(j.Summary, *summaryText(text))
		}
	case "message":
		j.Status, j.Role, j.Content = status, "assistant", []respPart{}
		if written {
			j.Content = append(j.Content, *outputTextPart(text))
		}
	case "function_call":
		if !written {
			text = ""
		}
		j.Status, j.CallID, j.Name, j.Namespace, j.Arguments = status, it.callID, it.name, it.namespace, &text
	case "custom_tool_call":
		input := ""
		if written {
			input = it.input()
		}
		j.Status, j.CallID, j.Name, j.Input = status, it.callID, it.name, &input
	}
	return j
}

func responsesUsage(u *llm.Usage) *respUsage {
	if u == nil {
		u = &llm.Usage{}
	}
	r := &respUsage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
	if r.TotalTokens == 0 {
		r.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	r.InputTokensDetails.CachedTokens = u.CachedTokens
	r.OutputTokensDetails.ReasoningTokens = u.ReasoningTokens
	return r
}

// The Responses wire shapes the gateway writes.

type respEvent struct {
	Type           string        `json:"type"`
	SequenceNumber int           `json:"sequence_number"`
	Response       *respObject   `json:"response,omitempty"`
	ItemID         string        `json:"item_id,omitempty"`
	OutputIndex    *int          `json:"output_index,omitempty"`
	ContentIndex   *int          `json:"content_index,omitempty"`
	SummaryIndex   *int          `json:"summary_index,omitempty"`
	Item           *respItemJSON `json:"item,omitempty"`
	Part           *respPart     `json:"part,omitempty"`
	Delta          *string       `json:"delta,omitempty"`
	Text           *string       `json:"text,omitempty"`
	Arguments      *string       `json:"arguments,omitempty"`
	Input          *string       `json:"input,omitempty"`
}

type respObject struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	CreatedAt         int64           `json:"created_at"`
	Status            string          `json:"status"`
	Model             string          `json:"model"`
	Output            []*respItemJSON `json:"output"`
	Error             *respError      `json:"error"`
	IncompleteDetails *respIncomplete `json:"incomplete_details"`
	respEcho
	Usage *respUsage `json:"usage,omitempty"`
}

// respEcho is what every response object repeats of its request, and OpenAI's always carries
// (the SDKs' types have each as required): the request's value, or the default the API
// states for one it left out. Values are relayed as the client sent them.
type respEcho struct {
	Instructions      json.RawMessage `json:"instructions"` // null when none
	MaxOutputTokens   *int            `json:"max_output_tokens"`
	ParallelToolCalls bool            `json:"parallel_tool_calls"`
	Temperature       float64         `json:"temperature"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	Tools             json.RawMessage `json:"tools"`
	TopP              float64         `json:"top_p"`
	Metadata          json.RawMessage `json:"metadata"`
}

// newRespEcho is what the response objects repeat of the decoded request in, with OpenAI's
// defaults for the fields it left out.
func newRespEcho(in *responsesRequest) *respEcho {
	e := &respEcho{Instructions: json.RawMessage(in.Instructions), MaxOutputTokens: in.MaxOutputTokens, ParallelToolCalls: true,
		Temperature: 1, ToolChoice: orJSON(in.ToolChoice, `"auto"`), Tools: orJSON(json.RawMessage(in.Tools.raw), `[]`), TopP: 1,
		Metadata: orJSON(json.RawMessage(in.Metadata), `{}`)}
	if in.ParallelToolCalls != nil {
		e.ParallelToolCalls = *in.ParallelToolCalls
	}
	if in.Temperature != nil {
		e.Temperature = *in.Temperature
	}
	if in.TopP != nil {
		e.TopP = *in.TopP
	}
	return e
}

// orJSON is raw, or def when raw is absent or null.
func orJSON(raw json.RawMessage, def string) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage(def)
	}
	return raw
}

type respItemJSON struct {
	ID        string     `json:"id"`
	Type      string     `json:"type"`
	Status    string     `json:"status,omitempty"`
	Role      string     `json:"role,omitempty"`
	Content   []respPart `json:"content,omitzero"`
	Summary   []respPart `json:"summary,omitzero"`
	CallID    string     `json:"call_id,omitempty"`
	Name      string     `json:"name,omitempty"`
	Namespace string     `json:"namespace,omitempty"`
	Arguments *string    `json:"arguments,omitempty"`
	Input     *string    `json:"input,omitempty"`
}

type respPart struct {
	Type        string  `json:"type"`
	Text        *string `json:"text,omitempty"`
	Annotations []any   `json:"annotations,omitzero"` // output_text: always present, empty
}

// outputTextPart is a message's text part; OpenAI's always carries its annotations, and the AI
// SDK refuses one without them.
func outputTextPart(text string) *respPart {
	return &respPart{Type: "output_text", Text: &text, Annotations: []any{}}
}

// summaryText is a reasoning item's summary part.
func summaryText(text string) *respPart {
	return &respPart{Type: "summary_text", Text: &text}
}

type respError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type respIncomplete struct {
	Reason string `json:"reason"`
}

type respUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens     int `json:"cached_tokens"`
		CacheWriteTokens int `json:"cache_write_tokens"` // no backend's count reaches a chat answer
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}
