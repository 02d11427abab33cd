package upstream

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestReadBody(t *testing.T) {
	tests := []struct {
		name string
		r    io.Reader
		max  int64
		want string
	}{
		{"short", strings.NewReader("hello"), 10, "hello"},
		{"capped", strings.NewReader("hello world"), 5, "hello"},
		{"exact", strings.NewReader("hello"), 5, "hello"},
		{"nil reader", nil, 5, ""},
		{"zero max", strings.NewReader("hello"), 0, ""},
		{"error midway keeps prefix", io.MultiReader(strings.NewReader("par"), iotest.ErrReader(errors.New("reset"))), 10, "par"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(ReadBody(tt.r, tt.max)); got != tt.want {
				t.Errorf("ReadBody = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	tests := []struct {
		name    string
		s       string
		secrets []string
		want    string
	}{
		{"none", "Incorrect API key provided", nil, "Incorrect API key provided"},
		{"one", "Incorrect API key provided: sk-abc123.", []string{"sk-abc123"}, "Incorrect API key provided: [redacted]."},
		{"repeated", "k=sk-abcd k=sk-abcd", []string{"sk-abcd"}, "k=[redacted] k=[redacted]"},
		{"short ignored", "a b c", []string{"a", ""}, "a b c"},
		{"longer first", "key nvapi-XYZW-long", []string{"XYZW", "nvapi-XYZW-long"}, "key [redacted]"},
		{"absent", "nothing here", []string{"sk-zzzz"}, "nothing here"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Redact(tt.s, tt.secrets...); got != tt.want {
				t.Errorf("Redact = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSnippet(t *testing.T) {
	long := strings.Repeat("a", 199) + "é and more"
	tests := []struct{ in, want string }{
		{"", "(empty body)"},
		{" \n\t ", "(empty body)"},
		{"<html>\n  <body>Bad Gateway</body>\n</html>", "<html> <body>Bad Gateway</body> </html>"},
		{strings.Repeat("x", 200), strings.Repeat("x", 200)},
		{strings.Repeat("x", 201), strings.Repeat("x", 200) + "…"},
		{long, strings.Repeat("a", 199) + "…"}, // é straddles the cut: dropped whole
	}
	for _, tt := range tests {
		if got := Snippet([]byte(tt.in)); got != tt.want {
			t.Errorf("Snippet(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
