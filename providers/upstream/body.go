package upstream

import (
	"io"
	"sort"
	"strings"
	"unicode/utf8"
)

// DefaultErrorBody is a sensible cap for reading a backend's error body: enough for any real
// error object, small enough that a misbehaving backend cannot make us buffer megabytes.
const DefaultErrorBody = 64 << 10

// ReadBody reads at most max bytes of r. A read error ends the body early rather than failing:
// an error body is evidence, and a partial one is still worth showing.
func ReadBody(r io.Reader, max int64) []byte {
	if r == nil || max <= 0 {
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(r, max))
	return b
}

// Redact replaces every occurrence of each secret in s with "[redacted]". Secrets shorter than
// four bytes are ignored: replacing "a" everywhere would destroy the message and protect
// nothing. Longer secrets are replaced first so one that contains another is not left half shown.
func Redact(s string, secrets ...string) string {
	var keep []string
	for _, k := range secrets {
		if len(k) >= 4 && strings.Contains(s, k) {
			keep = append(keep, k)
		}
	}
	if len(keep) == 0 {
		return s
	}
	sort.Slice(keep, func(i, j int) bool { return len(keep[i]) > len(keep[j]) })
	for _, k := range keep {
		s = strings.ReplaceAll(s, k, "[redacted]")
	}
	return s
}

// Snippet is the start of a body for an error message, on one line: secrets redacted
// first, then whitespace runs made one space, then cut past 200 bytes (see Cut). Redacting
// before cutting is what keeps a key that straddles the cut from showing all but its last
// characters.
func Snippet(b []byte, secrets ...string) string {
	s := strings.Join(strings.Fields(Redact(string(b), secrets...)), " ")
	if s == "" {
		return "(empty body)"
	}
	return Cut(s, 200)
}

// Cut returns s cut to at most max bytes, never inside a character, ending with "…" when
// something was cut off. Whatever it cuts must already be redacted: a secret cut in half no
// longer matches its value.
func Cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut-- // never split a character
	}
	return s[:cut] + "…"
}
