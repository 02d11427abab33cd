package llm

// Format names a wire format a client may speak besides OpenAI Chat Completions.
type Format string

// The ingress formats besides chat (SPEC §13).
const (
	FormatChat      Format = ""                   // OpenAI Chat Completions, the gateway's own vocabulary
	FormatResponses Format = "openai-responses"   // POST /v1/responses
	FormatMessages  Format = "anthropic-messages" // POST /v1/messages
)

// Native is a client's request as it was sent in a format other than chat. The request that
// carries it also holds its translation to chat, so every backend can serve it; an adapter
// whose backend speaks Format relays Body instead, without a lossy round trip through chat,
// and answers with chunks of that Format (Chunk.Format).
type Native struct {
	Format Format
	// Body is the client's JSON object as received. An adapter relaying it replaces only
	// "model" with Request.Model (the backend's own name for the model).
	Body []byte
	// Header holds the client's headers that belong to the format's API and change what the
	// backend does (Anthropic's anthropic-beta and anthropic-version), by canonical name.
	Header map[string]string
}

// NativeFor returns req's native body when it is in format f, nil otherwise. Adapters call
// it to decide between relaying and translating.
func (r *Request) NativeFor(f Format) *Native {
	if r.Native != nil && f != FormatChat && r.Native.Format == f {
		return r.Native
	}
	return nil
}
