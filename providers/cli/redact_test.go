package cli

import (
	"io"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestStderrNeverShowsPartOfAKey: a CLI that prints a key somewhere in its stderr. Two cuts
// meet it: the tail buffer keeps the last bytes (8 KiB in production, 1 KiB here to keep the
// test fast: the cut does not depend on the size), and the error message keeps the last 600
// bytes of that. For every key, every position of the key against either cut and any split
// of the writes, no piece of the key of 6 or more characters reaches the message or the log.
func TestStderrNeverShowsPartOfAKey(t *testing.T) {
	keys := map[string]string{
		"env secret":     "zH7pQ2mX9vL4tB8nR1cK6wY3sD5fG0aJ", // known by value, from the CLI's env
		"OpenAI-shaped":  "sk-proj-Zq3xXbT1lWmA9sPc7Ne4Rj2Ku8Vd5Hf0Gy6",
		"Anthropic-like": "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx-yz_0123",
		"Google-shaped":  "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
	}
	red := newRedactor(map[string]string{"OPENAI_API_KEY": keys["env secret"], "CODEX_HOME": "/tmp/h"})
	rng := rand.New(rand.NewPCG(1, 2))
	const filler = "retrying request after an error; "
	const tailMax = 1 << 10
	for name, key := range keys {
		// Positions around the tail buffer's cut, then around the message's 600-byte cut.
		var suffixes []int
		for s := tailMax - len(key) - 2; s <= tailMax+2; s++ {
			suffixes = append(suffixes, s)
		}
		for s := 600 - len(key) - 2; s <= 602; s++ {
			suffixes = append(suffixes, s)
		}
		for _, n := range suffixes {
			stderr := strings.Repeat(filler, 3) + "error: the backend refused " + key + fill(filler, n)
			tb := newTailBuffer(tailMax)
			for rest := stderr; rest != ""; { // in writes of random sizes, as a pipe delivers them
				k := min(len(rest), 1+rng.IntN(700))
				_, _ = io.WriteString(tb, rest[:k])
				rest = rest[k:]
			}
			tail := red.redact(tb.String()) // what stream.stderrTail returns
			for what, out := range map[string]string{"log": tail, "message": stderrDetail(tail, 3, 600)} {
				for i := 0; i+6 <= len(key); i++ {
					if strings.Contains(out, key[i:i+6]) {
						t.Fatalf("%s with %d bytes after it: the %s shows %q: %q", name, n, what, key[i:i+6], out)
					}
				}
			}
		}
	}
}

// fill returns exactly n bytes of repeated text.
func fill(text string, n int) string {
	return strings.Repeat(text, n/len(text)+1)[:n]
}
