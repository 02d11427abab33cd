package cli

import (
	"encoding/json"
	"regexp"
	"strings"

	"github.com/tollgate/tollgate/providers/llm"
)

// codexDialect runs `codex exec --json` (PROTOCOLS §8): read-only sandbox, no git repo
// needed, nothing persisted, prompt from stdin ("-").
var codexDialect = dialect{
	command: "codex",
	args: func(model, effort string) []string {
		a := []string{"exec", "--json", "--skip-git-repo-check", "--sandbox", "read-only",
			"--ephemeral", "--color", "never"}
		if model != "" {
			a = append(a, "--model="+model)
		}
		if effort != "" && isWord(effort) {
			a = append(a, "-c", "model_reasoning_effort="+effort)
		}
		return a
	},
	tail:       []string{"-"},
	newDecoder: func() decoder { return &codexDecoder{} },
	aliases:    map[string]string{"-m": "--model", "-s": "--sandbox", "--experimental-json": "--json"},
	repeatable: []string{"-c"},
}

// codexEvent is one line of `codex exec --json`; fields of all event types, all optional.
type codexEvent struct {
	Type    string `json:"type"`
	Message string `json:"message"` // "error"
	Item    *struct {
		ID   string `json:"id"`
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"item"`
	Usage *struct {
		InputTokens           int `json:"input_tokens"`
		CachedInputTokens     int `json:"cached_input_tokens"`
		OutputTokens          int `json:"output_tokens"`
		ReasoningOutputTokens int `json:"reasoning_output_tokens"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// codexDecoder decodes codex's JSONL. Codex prints whole items, not token deltas: each
// agent_message item becomes content (several are separated by a blank line), reasoning
// items become reasoning_content; an item that grows through item.updated is sent as the
// growth only.
type codexDecoder struct {
	done     bool
	last     *failure
	sentText map[string]string // item id → text already sent
	messages int               // agent messages started, for separators
}

func (d *codexDecoder) finished() bool     { return d.done }
func (d *codexDecoder) hint() *failure     { return d.last }
func (d *codexDecoder) finalEvent() string { return "turn.completed" }

func (d *codexDecoder) line(b []byte) ([]llm.Chunk, *failure) {
	if !looksJSON(b) {
		return nil, nil
	}
	var ev codexEvent
	if err := json.Unmarshal(b, &ev); err != nil {
		return nil, undecodable("codex", err)
	}
	switch ev.Type {
	case "item.started", "item.updated", "item.completed":
		return d.item(ev), nil
	case "turn.completed":
		d.done = true
		return finalChunks(llm.FinishStop, codexUsage(ev)), nil
	case "turn.failed":
		f := &failure{}
		if ev.Error != nil {
			f.message = ev.Error.Message
		}
		if f.message == "" && d.last != nil {
			f.message = d.last.message
		}
		return nil, f
	case "error":
		// Retry notices ("Reconnecting... 2/5 (...)") and fatal errors look alike; a fatal
		// one is followed by turn.failed. Keep it to explain a run that just stops. Codex
		// retries even a refused key for seconds: end the run at once on errors that
		// retrying cannot fix.
		msg := ev.Message
		if m := codexRetryNotice.FindStringSubmatch(msg); m != nil {
			msg = m[1]
		}
		d.last = &failure{message: msg}
		if k := classify(msg); k == llm.KindUpstreamAuth || k == llm.KindUpstreamQuota {
			return nil, d.last
		}
	}
	return nil, nil
}

// codexRetryNotice matches codex's "Reconnecting... 2/5 (the error)" events.
var codexRetryNotice = regexp.MustCompile(`^Reconnecting\.\.\. \d+/\d+ \((.*)\)$`)

func (d *codexDecoder) item(ev codexEvent) []llm.Chunk {
	it := ev.Item
	if it == nil || it.Text == "" {
		return nil
	}
	if d.sentText == nil {
		d.sentText = map[string]string{}
	}
	prev, seen := d.sentText[it.ID]
	delta := strings.TrimPrefix(it.Text, prev)
	if seen && !strings.HasPrefix(it.Text, prev) {
		return nil // rewritten rather than grown: what was sent stands
	}
	if delta == "" {
		return nil
	}
	d.sentText[it.ID] = it.Text
	switch it.Type {
	case "agent_message":
		if !seen && d.messages > 0 {
			delta = "\n\n" + delta
		}
		if !seen {
			d.messages++
		}
		return []llm.Chunk{{Content: delta}}
	case "reasoning":
		return []llm.Chunk{{ReasoningContent: delta}}
	}
	return nil // command runs, plans, warnings: the CLI's business, not the answer
}

func codexUsage(ev codexEvent) *llm.Usage {
	u := ev.Usage
	if u == nil {
		return nil
	}
	return &llm.Usage{
		PromptTokens:     u.InputTokens,
		CompletionTokens: u.OutputTokens,
		TotalTokens:      u.InputTokens + u.OutputTokens,
		CachedTokens:     u.CachedInputTokens,
		ReasoningTokens:  u.ReasoningOutputTokens,
	}
}
