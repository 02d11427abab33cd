package cli

import (
	"encoding/json"

	"github.com/tollgate/tollgate/providers/llm"
)

// geminiDialect runs `gemini --output-format stream-json` (PROTOCOLS §10) with the prompt on
// stdin (non-interactive because stdin is not a terminal) and approval mode "default", under
// which a non-interactive run gets no tool that needs approval.
var geminiDialect = dialect{
	command: "gemini",
	args: func(model, effort string) []string {
		a := []string{"--output-format", "stream-json", "--approval-mode", "default"}
		if model != "" {
			a = append(a, "--model="+model)
		}
		return a
	},
	newDecoder: func() decoder { return &geminiDecoder{} },
	aliases:    map[string]string{"-m": "--model", "-o": "--output-format"},
}

type geminiLine struct {
	Type     string `json:"type"`
	Role     string `json:"role"`     // message
	Content  string `json:"content"`  // message
	Delta    bool   `json:"delta"`    // message
	Severity string `json:"severity"` // error
	Message  string `json:"message"`  // error
	Status   string `json:"status"`   // result
	Error    *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
		Code    json.RawMessage
	} `json:"error"` // result
	Stats *struct {
		TotalTokens  int `json:"total_tokens"`
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
		Cached       int `json:"cached"`
	} `json:"stats"`
}

// geminiDecoder decodes Gemini CLI's stream-json. Assistant text comes as delta messages;
// a whole (non-delta) assistant message is used only when no deltas came before it.
type geminiDecoder struct {
	done      bool
	last      *failure
	sawDeltas bool
}

func (d *geminiDecoder) finished() bool     { return d.done }
func (d *geminiDecoder) hint() *failure     { return d.last }
func (d *geminiDecoder) finalEvent() string { return "a result line" }

func (d *geminiDecoder) line(b []byte) ([]llm.Chunk, *failure) {
	if !looksJSON(b) {
		return nil, nil
	}
	var l geminiLine
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, undecodable("gemini", err)
	}
	switch l.Type {
	case "message":
		if l.Role != "assistant" || l.Content == "" {
			return nil, nil
		}
		if l.Delta {
			d.sawDeltas = true
		} else if d.sawDeltas {
			return nil, nil
		}
		return []llm.Chunk{{Content: l.Content}}, nil
	case "error":
		if l.Severity != "warning" {
			d.last = &failure{message: l.Message}
		}
	case "result":
		if l.Status == "success" {
			d.done = true
			return finalChunks(llm.FinishStop, geminiUsage(l)), nil
		}
		f := &failure{message: "Gemini CLI failed"}
		if l.Error != nil && l.Error.Message != "" {
			f.message = l.Error.Message
			f.code = l.Error.Type
		} else if d.last != nil {
			f.message = d.last.message
		}
		return nil, f
	}
	return nil, nil
}

func geminiUsage(l geminiLine) *llm.Usage {
	s := l.Stats
	if s == nil {
		return nil
	}
	total := s.TotalTokens
	if total == 0 {
		total = s.InputTokens + s.OutputTokens
	}
	return &llm.Usage{PromptTokens: s.InputTokens, CompletionTokens: s.OutputTokens,
		TotalTokens: total, CachedTokens: s.Cached}
}
