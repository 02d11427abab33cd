package config

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// FieldError is one problem in a config: the file, the line when known, the field path
// (e.g. "providers[2].lanes") and what is wrong. A Load or Parse error joins all of them
// (errors.Join), so errors.As finds the first and the message lists every problem.
type FieldError struct {
	File string
	Line int    // 0 when unknown
	Path string // "" for whole-file problems
	Msg  string
}

func (e *FieldError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// problems collects FieldErrors while a config is checked.
type problems struct {
	file  string
	lines map[string]int // field path → line, from the YAML tree; nil for code-built configs
	list  []*FieldError
}

// add records a problem at path; the line is looked up from the YAML tree when known, falling
// back to the nearest enclosing field that has one.
func (p *problems) add(path, format string, args ...any) {
	p.list = append(p.list, &FieldError{File: p.file, Line: p.lineOf(path), Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (p *problems) lineOf(path string) int {
	for path != "" {
		if l, ok := p.lines[path]; ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return 0
}

// err returns the problems sorted by line (then path) and joined, with every secret
// replaced; nil when there are none.
func (p *problems) err(secrets []string) error {
	if len(p.list) == 0 {
		return nil
	}
	slices.SortStableFunc(p.list, func(a, b *FieldError) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Path, b.Path))
	})
	list := p.list
	if len(list) > maxProblems {
		rest := len(list) - maxProblems
		list = append(list[:maxProblems:maxProblems], &FieldError{File: p.file, Msg: fmt.Sprintf("and %d more problems", rest)})
	}
	errs := make([]error, len(list))
	for i, e := range list {
		e.Msg = scrub(e.Msg, secrets)
		e.Path = scrub(e.Path, secrets)
		errs[i] = e
	}
	return errors.Join(errs...)
}

// maxProblems caps the problems listed; past it the error says how many more there are.
const maxProblems = 50

// minSecretLen: shorter strings are not scrubbed; they cannot be useful secrets and
// replacing them would mangle ordinary words and numbers in messages.
const minSecretLen = 6

// scrub replaces every secret in s with "[redacted]".
func scrub(s string, secrets []string) string {
	for _, sec := range secrets {
		if len(sec) >= minSecretLen && strings.Contains(s, sec) {
			s = strings.ReplaceAll(s, sec, "[redacted]")
		}
	}
	return s
}

// addAt records a problem at an explicit line (the YAML walk knows it before the line map is
// complete).
func (p *problems) addAt(line int, path, format string, args ...any) {
	p.list = append(p.list, &FieldError{File: p.file, Line: line, Path: path, Msg: fmt.Sprintf(format, args...)})
}

// dropUnder removes problems after the first n that one of the first n already covers: a
// field the YAML walk rejected is not reported again by validation (same path or under it),
// nor is anything on the line of an expansion error (which has no path).
func (p *problems) dropUnder(n int) {
	if n == 0 {
		return
	}
	kept := p.list[:n]
	for _, e := range p.list[n:] {
		if !slices.ContainsFunc(p.list[:n], func(w *FieldError) bool { return covers(w, e) }) {
			kept = append(kept, e)
		}
	}
	p.list = kept
}

// covers reports whether problem e is a consequence of the earlier problem w.
func covers(w, e *FieldError) bool {
	if w.Path == "" {
		return w.Line > 0 && w.Line == e.Line
	}
	return within(e.Path, w.Path)
}

// within reports whether path is base or a field or element under it.
func within(path, base string) bool {
	if base == "" || !strings.HasPrefix(path, base) {
		return false
	}
	rest := path[len(base):]
	return rest == "" || rest[0] == '.' || rest[0] == '['
}
