package anthropic

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"

	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/sse"
	"github.com/tollgate/tollgate/providers/upstream"
)

// openNative relays a request that came in as Messages: the client's body with only "model"
// replaced, and its anthropic-version and anthropic-beta, so nothing a chat translation
// would lose (cache_control, signed thinking blocks, context_management, betas) is lost. The
// answer comes back as the backend's own events (Chunk.Format), each also decoded as the
// chat path decodes it, so errors are classified the same way and an error right after
// message_start still comes back from Open.
func (c *Client) openNative(ctx context.Context, req *llm.Request, n *llm.Native, key string) (llm.Stream, error) {
	model, err := json.Marshal(req.Model)
	if err != nil {
		return nil, fmt.Errorf("anthropic: encoding model: %w", err)
	}
	body, err := upstream.SetMember(n.Body, "model", func([]byte) []byte { return model })
	if err != nil {
		return nil, &llm.Error{Kind: llm.KindInvalidRequest, Provider: c.name, Message: "request body: " + err.Error(), Err: err}
	}
	return c.exchange(ctx, req, body, key, n.Header, true)
}

// nativeDecoder reads a Messages stream as an upstream.Decoder that yields each event as
// sent, with what the chat decoder reads of it in the chunk's structured fields.
type nativeDecoder struct{ *decoder }

// Event yields ev as sent; see upstream.Decoder.
func (d nativeDecoder) Event(ev sse.Event, out []llm.Chunk) ([]llm.Chunk, error) {
	decoded, err := d.decoder.Event(ev, nil)
	if err != nil {
		return out, err
	}
	name := ev.Type
	if name == "" || name == "message" {
		var t struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(ev.Data, &t) // the chat decoder has decoded it once already
		name = t.Type
	}
	ch := llm.Chunk{Raw: append([]byte(nil), ev.Data...), Format: llm.FormatMessages, Event: name}
	return append(out, merge(ch, decoded)), nil
}

// merge puts what the decoded chunks say into ch's structured fields.
func merge(ch llm.Chunk, decoded []llm.Chunk) llm.Chunk {
	for _, d := range decoded {
		ch.Role = cmp.Or(ch.Role, d.Role)
		ch.Content += d.Content
		ch.ReasoningContent += d.ReasoningContent
		ch.ToolCalls = append(ch.ToolCalls, d.ToolCalls...)
		if d.FinishReason != "" {
			ch.FinishReason = d.FinishReason
		}
		if d.Usage != nil {
			ch.Usage = d.Usage
		}
	}
	return ch
}
