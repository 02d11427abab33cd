package cli

import (
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"
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

// String returns the kept tail, starting at a character boundary, marked when cut.
func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf
	if t.dropped {
		for len(b) > 0 && !utf8.RuneStart(b[0]) {
			b = b[1:]
		}
		return "…" + string(b)
	}
	return string(b)
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
