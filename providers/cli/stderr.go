package cli

import (
	"regexp"
	"strings"
	"sync"
	"unicode"
)

// defaultStderrMax is how much of a child's stderr is kept: its tail, where the error is.
const defaultStderrMax = 8 << 10

// tailBuffer is an io.Writer that keeps only the last max bytes written to it.
type tailBuffer struct {
	mu      sync.Mutex
	max     int
	buf     []byte
	dropped bool // something was cut off the front
}

func newTailBuffer(max int) *tailBuffer {
	if max <= 0 {
		max = defaultStderrMax
	}
	return &tailBuffer{max: max}
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if len(p) >= t.max {
		p = p[len(p)-t.max:]
		t.buf = t.buf[:0]
		t.dropped = true
	} else if over := len(t.buf) + len(p) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
		t.dropped = true
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

// String returns the kept tail, marked when cut. A cut tail starts after the first white
// space past the cut: the token the cut went through (a key's last characters, perhaps) is
// dropped whole, since no redaction can recognise a fragment of it.
func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.dropped {
		return cutFront(string(t.buf))
	}
	return string(t.buf)
}

// cutFront marks s as the tail of something longer and drops the token cut at its front:
// everything up to the first white space.
func cutFront(s string) string {
	if i := strings.IndexFunc(s, unicode.IsSpace); i >= 0 {
		s = s[i:]
	} else {
		s = ""
	}
	return "…" + strings.TrimLeftFunc(s, unicode.IsSpace)
}

// secretPatterns match credentials a CLI might print in its diagnostics.
var secretPatterns = []*regexp.Regexp{
	regexp.MustCompile(`(?i)(authorization|x-api-key|api[_-]?key|token|secret|password)(["']?\s*[:=]\s*["']?)(bearer\s+)?[^\s"',;]+`),
	regexp.MustCompile(`(?i)bearer\s+[A-Za-z0-9._~+/=-]{8,}`),
	regexp.MustCompile(`\b(sk|pk|rk)-[A-Za-z0-9_-]{12,}`),
	regexp.MustCompile(`\bsk-ant-[A-Za-z0-9_-]{8,}`),
	regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{20,}`),
}

// redactor removes known secret values and anything shaped like a credential from text that
// may reach a client or a log.
type redactor struct {
	values []string // exact values to remove, e.g. the configured env's secrets
}

// newRedactor takes the values of env entries whose names say they are secret (config env is
// where keys for the CLI's backend live).
func newRedactor(env map[string]string) redactor {
	var r redactor
	for k, v := range env {
		if len(v) >= 4 && secretName(k) {
			r.values = append(r.values, v)
		}
	}
	return r
}

func secretName(name string) bool {
	n := strings.ToUpper(name)
	for _, w := range []string{"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "AUTH", "CREDENTIAL"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

func (r redactor) redact(s string) string {
	for _, v := range r.values {
		s = strings.ReplaceAll(s, v, "[redacted]")
	}
	s = secretPatterns[0].ReplaceAllString(s, "${1}${2}[redacted]")
	for _, re := range secretPatterns[1:] {
		s = re.ReplaceAllString(s, "[redacted]")
	}
	return s
}
