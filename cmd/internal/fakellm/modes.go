package fakellm

import (
	"fmt"
	"strings"
)

// Modes is a set of quirks applied to one request. A request's modes are the server's
// Options.Modes, plus those named by its X-Fakellm-Mode header, plus those named by its model
// (see modesFromModel).
type Modes uint32

// The quirk modes. Their names (modeNames) are what flags, headers and model names use.
const (
	ModeError200DashScope Modes = 1 << iota // HTTP 200 with a DashScope {"code","message"} error
	ModeError200Qianfan                     // HTTP 200 with a Qianfan {"error_code":18} body
	ModeGeminiNestedError                   // 429 RESOURCE_EXHAUSTED with RetryInfo 7s and QuotaFailure
	ModeGeminiDailyQuota                    // 429 RESOURCE_EXHAUSTED with a PerDay quotaId
	ModeErrorMidstream                      // a few chunks, then an error event in the endpoint's format
	ModeKeepalive                           // ": keep-alive" comments between chunks
	ModeSplitUTF8                           // multi-byte characters split across flushed writes
	ModeSlowDrip                            // one byte per flush
	ModeDrop                                // connection closed mid-stream
	ModeHang                                // no headers until the client goes away
	ModeGarbage                             // 200 with bytes that are not JSON
	ModeRateLimit                           // 429 with retry-after 2
	ModeOverloaded                          // Anthropic 529 overloaded_error, 503 elsewhere
	ModeQuota                               // OpenAI 429 insufficient_quota (and each API's equivalent)
	ModeQuota402                            // DeepSeek 402 Insufficient Balance
	ModeOllamaReasoning                     // reasoning deltas in "reasoning" (Ollama)
	ModeReasoning                           // reasoning deltas before the content (reasoning_content, thinking, thoughts)
	ModeToolCall                            // an agent's turn: call its shell tool once, then answer with what it printed (tool.go)
	modeEnd
)

var modeNames = map[string]Modes{
	"error-200-dashscope": ModeError200DashScope,
	"error-200-qianfan":   ModeError200Qianfan,
	"gemini-nested-error": ModeGeminiNestedError,
	"gemini-daily-quota":  ModeGeminiDailyQuota,
	"error-midstream":     ModeErrorMidstream,
	"keepalive":           ModeKeepalive,
	"split-utf8":          ModeSplitUTF8,
	"slow-drip":           ModeSlowDrip,
	"drop":                ModeDrop,
	"hang":                ModeHang,
	"garbage":             ModeGarbage,
	"rate-limit":          ModeRateLimit,
	"overloaded":          ModeOverloaded,
	"quota":               ModeQuota,
	"quota-402":           ModeQuota402,
	"ollama-reasoning":    ModeOllamaReasoning,
	"reasoning":           ModeReasoning,
	"tool-call":           ModeToolCall,
}

// modeAliases are accepted spellings kept for callers that wrote the vendor first.
var modeAliases = map[string]string{
	"dashscope-200": "error-200-dashscope",
	"qianfan-200":   "error-200-qianfan",
}

// ModeNames returns every mode name, for usage messages.
func ModeNames() []string {
	names := make([]string, 0, len(modeNames))
	for m := Modes(1); m < modeEnd; m <<= 1 {
		names = append(names, m.String())
	}
	return names
}

// Has reports whether all of m2 is in m.
func (m Modes) Has(m2 Modes) bool { return m&m2 == m2 }

// String returns the mode names joined by commas.
func (m Modes) String() string {
	var parts []string
	for bit := Modes(1); bit < modeEnd; bit <<= 1 {
		if m&bit == 0 {
			continue
		}
		for name, v := range modeNames {
			if v == bit {
				parts = append(parts, name)
			}
		}
	}
	return strings.Join(parts, ",")
}

// ParseModes reads a list of mode names separated by commas or plus signs; "" is no mode.
func ParseModes(s string) (Modes, error) {
	var m Modes
	for _, name := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '+' }) {
		name = strings.ToLower(strings.TrimSpace(name))
		if alias, ok := modeAliases[name]; ok {
			name = alias
		}
		bit, ok := modeNames[name]
		if !ok {
			return 0, fmt.Errorf("unknown fakellm mode %q (known: %s)", name, strings.Join(ModeNames(), ", "))
		}
		m |= bit
	}
	return m, nil
}

// modelQuirkPrefix marks a model name that selects modes: "quirk-rate-limit",
// "quirk-keepalive+reasoning", also after a path ("models/quirk-hang").
const modelQuirkPrefix = "quirk-"

// modesFromModel returns the modes a model name selects; none when it has no quirk prefix.
func modesFromModel(model string) (Modes, error) {
	i := strings.LastIndex(model, "/") + 1
	name, ok := strings.CutPrefix(model[i:], modelQuirkPrefix)
	if !ok {
		return 0, nil
	}
	return ParseModes(name)
}
