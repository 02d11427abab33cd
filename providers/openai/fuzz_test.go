package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/tollgate/tollgate/providers/llm"
	"github.com/tollgate/tollgate/providers/sse"
	"github.com/tollgate/tollgate/providers/wirejson"
	"github.com/tollgate/tollgate/providers/wirejson/wirejsontest"
)

// streamOver returns the stream the adapter would build over an SSE body, without HTTP.
func streamOver(c *Client, body io.Reader) *stream {
	return &stream{c: c, ctx: context.Background(), header: http.Header{},
		body: io.NopCloser(body), r: sse.NewReader(body)}
}

// FuzzStreamDecode feeds arbitrary bytes as a backend's SSE body: the stream must end (EOF or
// an error), never panic, and every chunk it hands out must be one whole JSON object.
func FuzzStreamDecode(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(testdataDir, "*", "stream_*.http"))
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			if i := bytes.Index(b, []byte("\n\n")); i >= 0 {
				f.Add(b[i+2:], strings.Contains(p, "ollama"))
			}
		}
	}
	f.Add([]byte("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1}}\n\n"), false)
	f.Add([]byte("data: {\"error_code\":18}\r\rdata: [DONE]\r\r"), false)
	f.Add([]byte("event: error\ndata: nope\n\n"), true)
	f.Fuzz(func(t *testing.T, body []byte, ollama bool) {
		kind := KindOpenAI
		if ollama {
			kind = KindOllama
		}
		c := &Client{kind: kind, name: "fuzz"}
		s := streamOver(c, iotest.HalfReader(bytes.NewReader(body)))
		for i := 0; ; i++ {
			if i > len(body)+1 {
				t.Fatal("more chunks than bytes")
			}
			ch, err := s.Next()
			if err != nil {
				if err != io.EOF {
					var e *llm.Error
					if !errorsAs(err, &e) {
						t.Fatalf("error %v is not an *llm.Error", err)
					}
				}
				return
			}
			if len(ch.Raw) == 0 || ch.Raw[0] != '{' || !json.Valid(ch.Raw) {
				t.Fatalf("chunk %d is not a JSON object: %q", i, ch.Raw)
			}
			if ch.UsageOnly && ch.Usage == nil {
				t.Fatalf("usage-only chunk without usage: %q", ch.Raw)
			}
		}
	})
}

func compact(b []byte) []byte {
	var buf bytes.Buffer
	_ = json.Compact(&buf, b)
	return buf.Bytes()
}

// BenchmarkStreamRelay measures the hot path: a 20-chunk stream (18 content chunks, a finish
// chunk and a usage chunk) read from memory.
func BenchmarkStreamRelay(b *testing.B) {
	var body bytes.Buffer
	for i := 0; i < 18; i++ {
		body.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"gpt-x","choices":[{"index":0,"delta":{"content":"token token "},"finish_reason":null}],"usage":null}` + "\n\n")
	}
	body.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"gpt-x","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}` + "\n\n")
	body.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"gpt-x","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":36,"total_tokens":48}}` + "\n\n")
	body.WriteString("data: [DONE]\n\n")
	raw := body.Bytes()
	c := &Client{kind: KindOpenAI, name: "bench"}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		s := streamOver(c, bytes.NewReader(raw))
		n := 0
		for {
			_, err := s.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != 20 {
			b.Fatalf("%d chunks, want 20", n)
		}
	}
}

// FuzzFrame holds scanFrame to references that read the frame otherwise: it takes exactly the
// objects encoding/json takes that name no member twice; on each it finds the finish reason a
// byte search finds, the usage encoding/json/v2's decode of the whole chunk finds (exact names,
// as the gateway reads a backend's JSON), flags every frame parseError takes for an error, and
// sees a bare "reasoning" key only where the byte searches do.
func FuzzFrame(f *testing.F) {
	for _, s := range []string{
		`{"choices":[{"delta":{"content":"x"},"finish_reason":null}],"usage":null}`,
		`{"choices":[{"delta":{},"finish_reason" : "length"}]}`,
		`{"choices":[],"usage" : {"prompt_tokens":5}}`,
		`{"choices":[{"delta":{"content":"\"usage\":{ \"finish_reason\":\"stop\""}}]}`,
		`{"error":{"message":"m","code":"rate_limit"}}`, `{"code":"Throttling","message":"m"}`,
		`{"error_code":18,"error_msg":"m"}`, `{"choices":[],"code":200}`, `{"a":{"code":"x"}}`,
		`{"choices":[{"delta":{"reasoning":"r"}}]}`, `{"choices":[{"delta":{"reasoning":"r","reasoning_content":"c"}}]}`,
		`{"x":"reasoning","finish_reason":"st\u006fp"}`, `{"usage":{"prompt_tokens":1},"usage":null}`,
		`{"choices":[],"usage":{"prompt_tokens":1},"Usage":{"prompt_tokens":2}}`, `{"choices":{},"usage":{"prompt_tokens":1}}`,
		`{"a":{"usage":{"x":1}},"usage":{"prompt_tokens":3},"choices":null}`, `{"\u0075sage":{"prompt_tokens":4},"usage":{}}`,
		`{"choices":[ ],"usage":{"prompt_tokens":"many"}}`, `{"finish_reason":{"finish_reason":"stop"}}`,
		`{"x\"finish_reason":"stop"}`, `{"choices":[{"finish_reason":"st\u006fp"}]}`, "{\"choices\":[{\"finish_reason\":\"\xff\"}]}",
		`{"choices":[],"usage":null,"usage":{"prompt_tokens":1}}`, `{"\u0075sage":{"prompt_tokens":4}}`, `{"Usage":{"prompt_tokens":4}}`,
		`{"choices":[{"delta":{},"usage":null}],"usage":{"prompt_tokens":2}}`, `{"x":{"usage":1},"Usage":{"prompt_tokens":3}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, ok := scanFrame(b)
		dup, _ := wirejsontest.NameFacts(b)
		if want := len(b) > 0 && b[0] == '{' && json.Valid(b) && !dup; ok != want {
			t.Fatalf("scanFrame(%q) ok = %v, want %v", b, ok, want)
		}
		if !ok {
			return
		}
		if _, isErr := parseError(b); isErr && !fr.errorish {
			t.Fatalf("scanFrame(%q) missed an error frame", b)
		}
		got, want := llm.Chunk{Raw: b}, llm.Chunk{Raw: b, FinishReason: searchFinish(b)}
		inspect(&got, &fr)
		wholeUsage(&want)
		if got.FinishReason != want.FinishReason || got.UsageOnly != want.UsageOnly || (got.Usage == nil) != (want.Usage == nil) ||
			got.Usage != nil && *got.Usage != *want.Usage {
			t.Fatalf("scanFrame(%q): finish %q usage-only %v usage %+v; the search's finish %q, the decode's %v %+v",
				b, got.FinishReason, got.UsageOnly, got.Usage, want.FinishReason, want.UsageOnly, want.Usage)
		}
		if fr.reasoning && !fr.reasoningContent && !hasBareReasoning(b) {
			t.Fatalf("scanFrame(%q) found a bare reasoning key the searches did not", b)
		}
	})
}

// wholeUsage is inspect's usage by encoding/json/v2's decode of the whole chunk, with the
// options that make it read names exactly and refuse one twice.
func wholeUsage(ch *llm.Chunk) {
	var info struct {
		Choices []jsontext.Value `json:"choices"`
		Usage   *usageJSON       `json:"usage"`
	}
	if jsonv2.Unmarshal(ch.Raw, &info, jsontext.AllowInvalidUTF8(true)) != nil || info.Usage == nil {
		return
	}
	ch.Usage = info.Usage.toLLM()
	ch.UsageOnly = len(info.Choices) == 0
}

// searchFinish is the finish reason as inspect found it before scanFrame, by a byte search
// for the key, with its string value decoded by encoding/json.
func searchFinish(raw []byte) llm.FinishReason {
	var fr string
	if v := valueAfterKey(raw, `"finish_reason"`); v != nil && len(v) > 0 && v[0] == '"' {
		_ = json.NewDecoder(bytes.NewReader(v)).Decode(&fr)
	}
	return llm.FinishReason(fr)
}

// valueAfterKey returns the bytes after `key:` for the first occurrence of key as an object
// key, or nil. In valid JSON a key's opening quote follows '{' or ',' (white space aside); a
// quote that follows a backslash is inside a string, as in the key "x\"finish_reason".
func valueAfterKey(raw []byte, key string) []byte {
	for off := 0; ; {
		i := bytes.Index(raw[off:], []byte(key))
		if i < 0 {
			return nil
		}
		before := bytes.TrimRight(raw[:off+i], " \t\r\n")
		rest := bytes.TrimLeft(raw[off+i+len(key):], " \t\r\n")
		if len(before) > 0 && (before[len(before)-1] == '{' || before[len(before)-1] == ',') && len(rest) > 0 && rest[0] == ':' {
			return bytes.TrimLeft(rest[1:], " \t\r\n")
		}
		off += i + len(key)
	}
}

// FuzzCompletion holds decodeCompletion to encoding/json (v1) where the two read names alike:
// it fails on every input encoding/json refuses or that names a member twice; on JSON whose
// names are all lower-case ASCII (so v1's matching without regard to case takes only the exact
// names) and none twice, it succeeds exactly where v1's decode does, with its finish reason,
// usage and number of choices.
func FuzzCompletion(f *testing.F) {
	for _, s := range []string{
		`{"id":"c","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`,
		`{"choices":[{"finish_reason":null}],"usage":null}`, `{"choices":[{"finish_reason":"length"},{"finish_reason":"stop"}]}`,
		`{"choices":[{}],"usage":{"prompt_tokens":"x"}}`, `{"choices":[5]}`, `{"choices":{},"usage":{"prompt_tokens":1}}`,
		`{"Choices":[{"finish_reason":"stop"}]}`, `{"choices":[{"Finish_Reason":"stop"}]}`, `{"choices":[{"finish_reason":"st\u006fp"}]}`,
		`{"choices":[{"finish_reason":"a","finish_reason":"b"}]}`, `{"choices":[{"x":{"finish_reason":"deep"}}],"usage":{"d":{"finish_reason":1}}}`,
		`{"choices":[ { "finish_reason" : "stop" } ] , "usage" : { } }`, `{"usage":{},"usage":{"prompt_tokens":2},"choices":[{}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 || b[0] != '{' {
			return // readComplete refuses these before it looks
		}
		facts, err := decodeCompletion(b)
		dup, folded := wirejsontest.NameFacts(b)
		if !json.Valid(b) || dup {
			if err == nil || wirejson.Valid(b) {
				t.Fatalf("decodeCompletion(%q) = %v, Valid %v; encoding/json's Valid %v, a name twice %v", b, err, wirejson.Valid(b), json.Valid(b), dup)
			}
			return
		}
		if folded {
			return // v1 would take "Usage" for usage
		}
		want, werr := decodeCompletionV1(b)
		if (err == nil) != (werr == nil) {
			t.Fatalf("decodeCompletion(%q) = %v; encoding/json: %v", b, err, werr)
		}
		if err == nil && (facts.finish != want.finish || facts.choices != want.choices || (facts.usage == nil) != (want.usage == nil) ||
			facts.usage != nil && *facts.usage != *want.usage) {
			t.Fatalf("decodeCompletion(%q) = %+v, encoding/json says %+v", b, facts, want)
		}
	})
}

// decodeCompletionV1 is decodeCompletion by encoding/json (v1).
func decodeCompletionV1(b []byte) (facts completionFacts, err error) {
	var info struct {
		Choices []struct {
			FinishReason llm.FinishReason `json:"finish_reason"`
		} `json:"choices"`
		Usage *usageJSON `json:"usage"`
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return facts, err
	}
	facts.usage, facts.choices = info.Usage.toLLM(), len(info.Choices)
	if len(info.Choices) > 0 {
		facts.finish = info.Choices[0].FinishReason
	}
	return facts, nil
}

// FuzzEvent holds decodeEvent to json.Unmarshal (v1) into a responsesEvent where the two read
// names alike (all lower-case ASCII, none twice): the same event, and an error exactly when
// encoding/json gives one; and to an error wherever encoding/json refuses the input or an
// object in it names a member twice.
func FuzzEvent(f *testing.F) {
	for _, s := range []string{
		`{"type":"response.output_text.delta","sequence_number":5,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi \"x\"\n"}`,
		`{"type":"response.completed","sequence_number":9,"response":{"id":"r","object":"response","status":"completed","output":[{"type":"message"}],"usage":{"input_tokens":5,"input_tokens_details":{"cached_tokens":1},"output_tokens":2,"output_tokens_details":{"reasoning_tokens":1},"total_tokens":7}}}`,
		`{"type":"response.failed","response":{"object":"response","status":"failed","error":{"code":"server_error","message":"m"}}}`,
		`{"type":"error","code":"rate_limit_exceeded","message":"slow down"}`, `{"type":null,"delta":null,"response":null}`,
		`{"Type":"x"}`, `{"type":"a","type":"b"}`, `{"t\u0079pe":"x"}`, `{"delta":5}`, `{"response":{"usage":{"input_tokens":"x"}}}`,
		`{"response":[]}`, `[]`, `null`, ` {"type":"x"}`, `{"reſponse":{"status":"failed"}}`, `{"code":"\ud83d"}`, "{\"message\":\"\xff\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var got, want responsesEvent
		gerr, werr := decodeEvent(b, &got), json.Unmarshal(b, &want)
		dup, folded := wirejsontest.NameFacts(b)
		switch {
		case !json.Valid(b) || dup:
			if gerr == nil {
				t.Fatalf("decodeEvent(%q) took it; encoding/json's Valid %v, a name twice %v", b, json.Valid(b), dup)
			}
		case folded:
		case (gerr == nil) != (werr == nil):
			t.Fatalf("decodeEvent(%q) error %v; encoding/json: %v", b, gerr, werr)
		case gerr == nil && !reflect.DeepEqual(got, want):
			t.Fatalf("decodeEvent(%q) = %+v; encoding/json: %+v", b, got, want)
		}
	})
}
