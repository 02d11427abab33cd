package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// claudeDialect runs `claude -p --output-format stream-json --verbose
// --include-partial-messages` (PROTOCOLS §9): no built-in tools, no MCP servers, permission
// mode dontAsk (anything not pre-approved is denied, yet it still answers), nothing saved.
var claudeDialect = dialect{
	command: "claude",
	env: map[string]string{
		// No auto-updater, telemetry or other background traffic from a one-shot run.
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
	},
	args: func(model, effort string) []string {
		a := []string{"-p", "--output-format", "stream-json", "--verbose", "--include-partial-messages",
			"--tools", "", "--strict-mcp-config", "--permission-mode", "dontAsk",
			"--no-session-persistence"}
		if model != "" {
			a = append(a, "--model="+model)
		}
		if effort != "" && isWord(effort) {
			a = append(a, "--effort="+effort)
		}
		return a
	},
	newDecoder: func() decoder { return &claudeDecoder{} },
	aliases:    map[string]string{"--print": "-p"},
}

// claudeMaxRetries is how many of Claude Code's own retries of a retryable API error
// (rate limit, overload) a run may sit through before we end it and report the error: the
// CLI backs off for minutes while holding a lane the gateway could give to someone else.
const claudeMaxRetries = 2

type claudeLine struct {
	Type    string `json:"type"`
	Subtype string `json:"subtype"`
	// stream_event
	Event *claudeStreamEvent `json:"event"`
	// assistant
	Message *struct {
		ID      string `json:"id"`
		Content []struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			Thinking string `json:"thinking"`
		} `json:"content"`
	} `json:"message"`
	// assistant: error code; system/api_retry: error code too
	Error json.RawMessage `json:"error"`
	// system/api_retry
	Attempt      int `json:"attempt"`
	RetryDelayMs int `json:"retry_delay_ms"`
	ErrorStatus  int `json:"error_status"`
	// result
	IsError    bool     `json:"is_error"`
	Result     string   `json:"result"`
	Errors     []string `json:"errors"`
	StopReason string   `json:"stop_reason"`
	Usage      *struct {
		InputTokens              int `json:"input_tokens"`
		OutputTokens             int `json:"output_tokens"`
		CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     int `json:"cache_read_input_tokens"`
		OutputTokensDetails      *struct {
			ThinkingTokens int `json:"thinking_tokens"`
		} `json:"output_tokens_details"`
	} `json:"usage"`
}

// claudeStreamEvent is an Anthropic streaming event as Claude Code relays it.
type claudeStreamEvent struct {
	Type    string `json:"type"`
	Message *struct {
		ID string `json:"id"`
	} `json:"message"`
	Delta *struct {
		Type       string `json:"type"`
		Text       string `json:"text"`
		Thinking   string `json:"thinking"`
		StopReason string `json:"stop_reason"`
	} `json:"delta"`
}

// claudeDecoder decodes Claude Code's stream-json. Token deltas come from stream_event
// lines; whole assistant lines repeat them and are used only for messages that had no
// partial events (runs without --include-partial-messages).
type claudeDecoder struct {
	done       bool
	last       *failure
	partial    map[string]bool // message ids seen through stream_event
	current    string          // id of the message being streamed
	textSent   bool            // some content went out (to separate later messages)
	needSep    bool            // a new message began after content went out
	stopReason string
}

func (d *claudeDecoder) finished() bool     { return d.done }
func (d *claudeDecoder) hint() *failure     { return d.last }
func (d *claudeDecoder) finalEvent() string { return "a result line" }

func (d *claudeDecoder) line(b []byte) ([]llm.Chunk, *failure) {
	if !looksJSON(b) {
		return nil, nil
	}
	var l claudeLine
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, undecodable("claude", err)
	}
	switch l.Type {
	case "stream_event":
		return d.streamEvent(l.Event), nil
	case "assistant":
		return d.assistant(l)
	case "system":
		if l.Subtype == "api_retry" {
			return nil, d.apiRetry(l)
		}
	case "result":
		return d.result(l)
	}
	return nil, nil
}

func (d *claudeDecoder) streamEvent(ev *claudeStreamEvent) []llm.Chunk {
	if ev == nil {
		return nil
	}
	switch ev.Type {
	case "message_start":
		if ev.Message != nil {
			if d.partial == nil {
				d.partial = map[string]bool{}
			}
			d.partial[ev.Message.ID] = true
			d.current = ev.Message.ID
		}
		d.needSep = d.textSent
	case "content_block_delta":
		if ev.Delta == nil {
			return nil
		}
		switch ev.Delta.Type {
		case "text_delta":
			return d.text(ev.Delta.Text)
		case "thinking_delta":
			if ev.Delta.Thinking != "" {
				return []llm.Chunk{{ReasoningContent: ev.Delta.Thinking}}
			}
		}
	case "message_delta":
		if ev.Delta != nil && ev.Delta.StopReason != "" {
			d.stopReason = ev.Delta.StopReason
		}
	}
	return nil
}

func (d *claudeDecoder) text(t string) []llm.Chunk {
	if t == "" {
		return nil
	}
	if d.needSep {
		t = "\n\n" + t
		d.needSep = false
	}
	d.textSent = true
	return []llm.Chunk{{Content: t}}
}

func (d *claudeDecoder) assistant(l claudeLine) ([]llm.Chunk, *failure) {
	if l.Message == nil {
		return nil, nil
	}
	if code := errorCode(l.Error); code != "" {
		// A synthetic message standing for an API error ("Invalid API key · ..."); the
		// result line that follows carries the same text and fails the run.
		var text []string
		for _, c := range l.Message.Content {
			text = append(text, c.Text)
		}
		d.last = claudeFailure(code, strings.Join(text, " "))
		return nil, nil
	}
	if d.partial[l.Message.ID] {
		return nil, nil // already streamed token by token
	}
	d.needSep = d.textSent
	var out []llm.Chunk
	for _, c := range l.Message.Content {
		switch c.Type {
		case "text":
			out = append(out, d.text(c.Text)...)
		case "thinking":
			if c.Thinking != "" {
				out = append(out, llm.Chunk{ReasoningContent: c.Thinking})
			}
		}
	}
	return out, nil
}

// apiRetry watches Claude Code retrying an API call. Errors that retrying cannot fix end
// the run at once; retryable ones after claudeMaxRetries.
func (d *claudeDecoder) apiRetry(l claudeLine) *failure {
	code := errorCode(l.Error)
	msg := fmt.Sprintf("Claude Code's API call failed (%s", code)
	if l.ErrorStatus != 0 {
		msg += fmt.Sprintf(", HTTP %d", l.ErrorStatus)
	}
	msg += ")"
	f := claudeFailure(code, msg)
	f.status = l.ErrorStatus
	if f.kind == llm.KindUpstream && !f.known {
		f.kind, f.known = statusKind(l.ErrorStatus)
	}
	f.retryAfter = time.Duration(l.RetryDelayMs) * time.Millisecond
	d.last = f
	if (f.known && !f.kind.Retryable() && f.kind != llm.KindUpstream) || l.Attempt > claudeMaxRetries {
		return f
	}
	return nil
}

func (d *claudeDecoder) result(l claudeLine) ([]llm.Chunk, *failure) {
	if l.Subtype == "success" && !l.IsError {
		d.done = true
		reason := l.StopReason
		if reason == "" {
			reason = d.stopReason
		}
		return finalChunks(anthropicFinish(reason), claudeUsage(l)), nil
	}
	msg := l.Result
	if msg == "" {
		msg = strings.Join(l.Errors, "; ")
	}
	if msg == "" {
		msg = "Claude Code ended with " + l.Subtype
	}
	f := &failure{message: msg}
	if d.last != nil && d.last.known {
		f.kind, f.known, f.code, f.status = d.last.kind, true, d.last.code, d.last.status
		f.retryAfter = d.last.retryAfter
	}
	return nil, f
}

// claudeFailure maps Claude Code's error codes (SDKAssistantMessage.error) to kinds.
func claudeFailure(code, msg string) *failure {
	f := &failure{message: msg, code: code, known: true}
	switch code {
	case "authentication_failed":
		f.kind = llm.KindUpstreamAuth
	case "billing_error":
		f.kind = llm.KindUpstreamQuota
	case "rate_limit":
		f.kind = llm.KindUpstreamRateLimited
	case "invalid_request":
		f.kind = llm.KindUpstreamInvalid
	case "server_error":
		f.kind = llm.KindUpstream
	default:
		f.known = false
	}
	return f
}

// statusKind maps an HTTP status Claude Code reported to a kind, when it decides one.
func statusKind(status int) (llm.Kind, bool) {
	switch status {
	case 401, 403:
		return llm.KindUpstreamAuth, true
	case 429:
		return llm.KindUpstreamRateLimited, true
	case 400, 404, 413, 422:
		return llm.KindUpstreamInvalid, true
	}
	return llm.KindUpstream, false
}

// errorCode reads an error field that is either a code string or an object with "type".
func errorCode(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var o struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &o) == nil && o.Type != "" {
		return o.Type
	}
	return "unknown"
}

// anthropicFinish maps Anthropic stop reasons to OpenAI finish reasons. tool_use maps to
// stop: the CLI runs its tools itself, the client never sees a call.
func anthropicFinish(r string) llm.FinishReason {
	switch r {
	case "max_tokens", "model_context_window_exceeded":
		return llm.FinishLength
	case "refusal":
		return llm.FinishContentFilter
	}
	return llm.FinishStop
}

func claudeUsage(l claudeLine) *llm.Usage {
	u := l.Usage
	if u == nil {
		return nil
	}
	prompt := u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
	out := &llm.Usage{
		PromptTokens:     prompt,
		CompletionTokens: u.OutputTokens,
		TotalTokens:      prompt + u.OutputTokens,
		CachedTokens:     u.CacheReadInputTokens,
	}
	if u.OutputTokensDetails != nil {
		out.ReasoningTokens = u.OutputTokensDetails.ThinkingTokens
	}
	return out
}
