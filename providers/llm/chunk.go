package llm

import "context"

// FinishReason is why a choice ended, in OpenAI's vocabulary.
type FinishReason string

// The finish reasons OpenAI clients understand. Adapters map their backend's reasons onto these.
const (
	FinishNone          FinishReason = ""
	FinishStop          FinishReason = "stop"
	FinishLength        FinishReason = "length"
	FinishToolCalls     FinishReason = "tool_calls"
	FinishContentFilter FinishReason = "content_filter"
)

// Usage counts tokens. Zero means unknown or none.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	CachedTokens     int `json:"-"` // prompt tokens served from a cache
	ReasoningTokens  int `json:"-"` // completion tokens spent reasoning
}

// Chunk is one piece of a backend's answer.
//
// A translating adapter (Anthropic, Gemini, CLIs) fills the structured fields and leaves Raw
// nil; the HTTP layer encodes them as an OpenAI chunk. An OpenAI-compatible adapter sets Raw
// to the backend's chat.completion.chunk JSON, which is relayed byte for byte so a stream is
// not decoded and re-encoded on the hot path; it may also fill Usage and FinishReason when it
// can see them cheaply, for logs. Structured fields never contradict Raw.
type Chunk struct {
	// Raw is a complete OpenAI JSON object: a chat.completion.chunk, or a whole
	// chat.completion when Complete is set. Nil for structured chunks.
	Raw []byte
	// Complete marks Raw as a whole non-streaming chat.completion (the only chunk of its stream).
	Complete bool
	// Format is Raw's wire format when it is not chat: an adapter relaying Request.Native
	// sends the backend's events in that format, and Event is then the SSE event name of Raw
	// ("" with Complete, where Raw is the whole answer). The structured fields may mirror
	// what Raw says (text, usage, finish) for logs and for priming; the HTTP layer relays Raw.
	Format Format
	Event  string
	// UsageOnly marks a chunk that exists only to carry usage (OpenAI's final "choices": []
	// chunk); the HTTP layer drops it when the client did not ask for include_usage.
	UsageOnly bool

	Index            int // choice index
	Role             string
	Content          string
	ReasoningContent string
	ToolCalls        []ToolCallDelta
	FinishReason     FinishReason
	Usage            *Usage
}

// ToolCallDelta is a fragment of a streamed tool call. ID, Type and Name come on the first
// fragment of a call; Arguments fragments are concatenated by the client.
type ToolCallDelta struct {
	Index     int
	ID        string
	Type      string
	Name      string
	Arguments string
}

// Stream is a backend answer being received.
//
// Next returns the next chunk, or io.EOF after the last one; any other error ends the stream
// (an *Error when the backend reported one). Close stops the call if it is still running and
// returns only once the backend has actually stopped (HTTP body closed, child process reaped);
// it is safe to call at any time and more than once. Next and Close are called from one
// goroutine; cancelling the context given to Open is how another goroutine stops a stream.
type Stream interface {
	Next() (Chunk, error)
	Close() error
}

// Backend opens calls to one provider. Open returns once the backend has accepted the call
// (HTTP headers received; a CLI's first chunk produced) or failed; errors the backend reports
// before its first chunk come back from Open as *Error so the gateway can answer with a proper
// status.
// The context bounds the whole call: cancelling it stops the backend work.
type Backend interface {
	Open(ctx context.Context, req *Request) (Stream, error)
}

// ModelLister is the optional capability of a backend that can list its models.
type ModelLister interface {
	ListModels(ctx context.Context) ([]ModelInfo, error)
}

// ModelInfo is what a backend says about one of its models. Zero values mean unknown.
type ModelInfo struct {
	ID              string
	Type            string // TypeEmbedding when the backend says the model embeds; "" unknown
	ContextWindow   int
	MaxOutputTokens int
}
