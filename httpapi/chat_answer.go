package httpapi

import (
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

var doneData = []byte("[DONE]")

// chatAnswer is chat's answer format, also legacy completions': an OpenAI-compatible
// backend's chunks relayed as they came, structured ones encoded once (chunkEncoder, or
// completion for a whole answer). It holds both ways of writing it, so that the answer
// costs one allocation whichever the request asks for.
type chatAnswer struct {
	id        string // the answer's: the request's, or a batch member's
	model     string // the model the answer names: the request's, or a batch member's
	req       *llm.Request
	now       func() time.Time
	streamed  chatStream
	assembled chatWhole
}

func newChatAnswer(s *Server, p *parsed, rec *record) answerFormat {
	return &chatAnswer{id: rec.id, model: p.req.Model, req: p.req, now: s.opts.Now}
}

func (c *chatAnswer) stream(out *eventOut) streamSink {
	c.streamed = chatStream{out: out, req: c.req, enc: newChunkEncoder(c.id, c.model, c.now())}
	return &c.streamed
}

func (c *chatAnswer) whole() wholeSink {
	c.assembled.answer = c
	return &c.assembled
}

// chatStream is chat's streamed answer: every chunk an SSE data event, the usage last when
// the client asked for it (stream_options.include_usage), then data: [DONE].
type chatStream struct {
	out   *eventOut
	req   *llm.Request
	enc   chunkEncoder
	usage *llm.Usage // a structured stream's usage, sent last when the client asked for it
}

func (c *chatStream) start() error { return nil } // chat's stream opens with its first chunk

func (c *chatStream) add(ch *llm.Chunk) error {
	data := c.enc.wire(ch, c.req, &c.usage)
	if data == nil {
		return nil
	}
	return c.out.event("", data)
}

func (c *chatStream) end() error {
	if err := c.tail(); err != nil {
		return err
	}
	return c.out.event("", doneData)
}

// tail writes what follows the last chunk before data: [DONE]: the usage, when the client
// asked for it.
func (c *chatStream) tail() error {
	if c.usage != nil && c.req.WantsUsage() {
		return c.out.event("", c.enc.usage(c.usage))
	}
	return nil
}

// fail writes the error in OpenAI's shape as one data event (SPEC §4).
func (c *chatStream) fail(a apiError) error { return c.out.event("", a.event()) }

// chatWhole is chat's whole answer: one chat.completion assembled from the chunks.
type chatWhole struct {
	answer *chatAnswer
	acc    completion
}

func (c *chatWhole) add(ch *llm.Chunk) error { return c.acc.add(ch) }

func (c *chatWhole) build() (any, error) {
	return c.acc.build(c.answer.id, c.answer.model, c.answer.now()), nil
}
