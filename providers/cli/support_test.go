package cli

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"
	"unicode/utf8"

	"github.com/tollgate/tollgate/providers/llm"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		text string
		want llm.Kind
	}{
		{"exceeded retry limit, last status: 429 Too Many Requests", llm.KindUpstreamRateLimited},
		{"Rate limit reached for gpt-5 in organization org-x. Please try again in 7s.", llm.KindUpstreamRateLimited},
		{"unexpected status 401 Unauthorized: invalid x-api-key", llm.KindUpstreamAuth},
		{"Missing environment variable: `RELAY_API_KEY`", llm.KindUpstreamAuth},
		{"Not logged in · Please run /login", llm.KindUpstreamAuth},
		{"You exceeded your current quota, please check your plan and billing details.", llm.KindUpstreamQuota},
		{"Your credit balance is too low", llm.KindUpstreamQuota},
		{"stream disconnected before completion", llm.KindUpstream},
		{"", llm.KindUpstream},
	}
	for _, tc := range tests {
		if got := classify(tc.text); got != tc.want {
			t.Errorf("classify(%q) = %v, want %v", tc.text, got, tc.want)
		}
	}
}

func TestRetryAfterIn(t *testing.T) {
	tests := []struct {
		text string
		want time.Duration
	}{
		{"Please try again in 7s.", 7 * time.Second},
		{"try again in 1.5 seconds", 1500 * time.Millisecond},
		{"Please retry in 250ms", 250 * time.Millisecond},
		{"retry in 2 minutes", 2 * time.Minute},
		{"try again later", 0},
	}
	for _, tc := range tests {
		if got := retryAfterIn(tc.text); got != tc.want {
			t.Errorf("retryAfterIn(%q) = %v, want %v", tc.text, got, tc.want)
		}
	}
}

func FuzzRetryAfterIn(f *testing.F) {
	f.Add("Please try again in 7s.")
	f.Add("retry in 1e308 minutes")
	f.Fuzz(func(t *testing.T, s string) {
		if d := retryAfterIn(s); d < 0 {
			t.Fatalf("negative wait %v for %q", d, s)
		}
	})
}

func TestRedact(t *testing.T) {
	r := newRedactor(map[string]string{"RELAY_API_KEY": "hunter2-relay", "CODEX_HOME": "/tmp/codex-home-dir"})
	in := "using hunter2-relay at /tmp/codex-home-dir; Authorization: Bearer abcdefghijkl; x-api-key: zzz; " +
		"key sk-proj-abcdefghijklmnop and sk-ant-api03-abcdefgh and AIzaSyA1234567890123456789012"
	got := r.redact(in)
	for _, secret := range []string{"hunter2", "abcdefghijkl", "zzz", "sk-proj", "sk-ant", "AIzaSy"} {
		if strings.Contains(got, secret) {
			t.Errorf("%q survived: %s", secret, got)
		}
	}
	if !strings.Contains(got, "/tmp/codex-home-dir") {
		t.Errorf("a non-secret value was redacted: %s", got)
	}
}

func TestTailBufferKeepsWholeTokensOfTheTail(t *testing.T) {
	tb := newTailBuffer(15)
	io.WriteString(tb, "first line\n")
	io.WriteString(tb, "xx世界 世界世界") // the last 15 bytes start inside 界: that token is dropped whole
	got := tb.String()
	if !utf8.ValidString(got) || got != "…世界世界" {
		t.Errorf("tail %q, want …世界世界", got)
	}
	noSpace := newTailBuffer(4)
	io.WriteString(noSpace, "sk-0123456789")
	if got := noSpace.String(); got != "…" {
		t.Errorf("tail %q of one cut token, want only the mark", got)
	}
	small := newTailBuffer(100)
	io.WriteString(small, "short")
	if small.String() != "short" {
		t.Errorf("tail %q, want short", small.String())
	}
}

func TestBuildEnv(t *testing.T) {
	parent := map[string]string{"PATH": "/bin", "HOME": "/home/u", "OPENAI_API_KEY": "sk-x", "LANG": "C"}
	getenv := func(k string) (string, bool) { v, ok := parent[k]; return v, ok }
	got := strings.Join(buildEnv(getenv, map[string]string{"A": "default", "LANG": "default"},
		map[string]string{"A": "configured", "KEY": "k"}), " ")
	want := "A=configured HOME=/home/u KEY=k LANG=default PATH=/bin"
	if got != want {
		t.Errorf("env %q, want %q", got, want)
	}
}

func TestLineReader(t *testing.T) {
	long := strings.Repeat("x", 100_000)
	in := "one\r\n\n  \ntwo 世界\n" + long + "\nlast"
	lr := newLineReader(iotest.OneByteReader(strings.NewReader(in)), 0)
	var got []string
	for {
		l, err := lr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(l))
	}
	want := []string{"one", "two 世界", long, "last"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("lines %d, want %d", len(got), len(want))
	}

	lr = newLineReader(strings.NewReader(long+"\n"), 1000)
	if _, err := lr.next(); !errors.Is(err, errLineTooLong) {
		t.Errorf("over-long line: %v, want errLineTooLong", err)
	}
}

// FuzzLineReader checks the reader against bytes.Split, whatever the read sizes.
func FuzzLineReader(f *testing.F) {
	f.Add([]byte("a\nb\r\n\nc"), uint8(1))
	f.Add([]byte("世界\n🙂"), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, step uint8) {
		var want [][]byte
		for _, l := range bytes.Split(data, []byte("\n")) {
			l = bytes.TrimSuffix(l, []byte("\r"))
			if len(bytes.TrimSpace(l)) > 0 {
				want = append(want, l)
			}
		}
		r := io.Reader(bytes.NewReader(data))
		if step%2 == 1 {
			r = iotest.HalfReader(r)
		}
		lr := newLineReader(r, 0)
		for i := 0; ; i++ {
			l, err := lr.next()
			if errors.Is(err, io.EOF) {
				if i != len(want) {
					t.Fatalf("got %d lines, want %d", i, len(want))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if i >= len(want) || !bytes.Equal(l, want[i]) {
				t.Fatalf("line %d = %q", i, l)
			}
		}
	})
}
