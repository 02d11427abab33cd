package openai

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/providers/llm"
)

// TestJSONSpace: a stream frame and a whole answer may have JSON's white space (space, tab,
// CR, LF) around their object and nothing else, as encoding/json decides; one with a vertical
// tab, a form feed, a no-break space, NEL or a line separator around it is not JSON, and is
// refused as such rather than trimmed and relayed as if it were.
func TestJSONSpace(t *testing.T) {
	const obj = `{"id":"c","choices":[{"index":0,"delta":{"content":"x"},"message":{"role":"assistant","content":"x"},"finish_reason":"stop"}]}`
	for _, tt := range []struct{ before, after string }{
		{"", ""}, {" \t", "\t "}, {"\v", ""}, {"", "\f"}, {"\u00a0", ""}, {"", "\u00a0"}, {"\u0085", ""}, {"", "\u2028"},
	} {
		data := tt.before + obj + tt.after
		want := json.Valid([]byte(data))
		c := &Client{kind: KindOpenAI, name: "t"}

		s := streamOver(c, strings.NewReader("data: "+data+"\n\ndata: [DONE]\n\n"))
		ch, err := s.Next()
		if want && (err != nil || string(ch.Raw) != obj) {
			t.Errorf("frame %q: %q, %v; want the object", data, ch.Raw, err)
		}
		if !want && !isUpstream(err) {
			t.Errorf("frame %q: %q, %v; want an upstream error", data, ch.Raw, err)
		}

		var whole llm.Chunk
		err = c.readComplete(context.Background(), http.Header{}, strings.NewReader("\n"+data+"\n"), &whole)
		if want && (err != nil || string(whole.Raw) != obj || whole.FinishReason != "stop") {
			t.Errorf("answer %q: %q, %v; want the object", data, whole.Raw, err)
		}
		if !want && !isUpstream(err) {
			t.Errorf("answer %q: %q, %v; want an upstream error", data, whole.Raw, err)
		}
	}
}

func isUpstream(err error) bool {
	var e *llm.Error
	return err != nil && err != io.EOF && errorsAs(err, &e) && e.Kind == llm.KindUpstream
}
