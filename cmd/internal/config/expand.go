package config

import (
	"bytes"
	"fmt"
	"strings"
)

// expand replaces ${VAR} in the raw config text with values from env, before YAML parsing.
//
// Rules (documented for users in testdata/config/example.yaml):
//   - ${VAR} is replaced by the variable's value; an unset variable is an error naming the
//     file, line and variable, so a missing key never silently becomes "auth off".
//   - ${VAR:-default} uses default when VAR is unset or empty (default is literal text).
//   - $${ is a literal "${"; a "$" not followed by "{" is left alone ($HOME stays "$HOME").
//   - Nothing is expanded inside YAML comments, so commented-out examples may name unset
//     variables.
//   - The value is inserted verbatim: quote the placeholder ("${KEY}") when the value may hold
//     YAML punctuation. A value containing a newline is rejected because it would change the
//     document's structure and shift every line number after it.
//
// It returns the expanded text and the substituted values (to scrub from error messages).
func expand(file string, data []byte, env func(string) (string, bool)) ([]byte, []string, []*FieldError) {
	var (
		out     bytes.Buffer
		secrets []string
		errs    []*FieldError
	)
	lines := bytes.SplitAfter(data, []byte("\n"))
	for i, line := range lines {
		lineNo := i + 1
		code, comment := splitComment(string(line))
		s, vals, lineErrs := expandLine(code, env)
		for _, msg := range lineErrs {
			errs = append(errs, &FieldError{File: file, Line: lineNo, Msg: msg})
		}
		secrets = append(secrets, vals...)
		out.WriteString(s)
		out.WriteString(comment)
	}
	return out.Bytes(), secrets, errs
}

// expandLine expands the placeholders in one line of YAML (comment already removed).
func expandLine(s string, env func(string) (string, bool)) (string, []string, []string) {
	if !strings.Contains(s, "${") {
		return s, nil, nil
	}
	var (
		b    strings.Builder
		vals []string
		errs []string
	)
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			break
		}
		if i > 0 && s[i-1] == '$' { // "$${" → literal "${"
			b.WriteString(s[:i-1])
			b.WriteString("${")
			s = s[i+2:]
			continue
		}
		b.WriteString(s[:i])
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			errs = append(errs, "unterminated ${ (write $${ for a literal ${)")
			b.WriteString(s[i:])
			break
		}
		body := s[i+2 : i+end]
		s = s[i+end+1:]
		val, err := lookup(body, env)
		if err != "" {
			errs = append(errs, err)
			continue
		}
		vals = append(vals, val)
		b.WriteString(val)
	}
	return b.String(), vals, errs
}

// lookup resolves the inside of one ${...}; it returns a non-empty message on failure.
// Messages name the variable, never its value.
func lookup(body string, env func(string) (string, bool)) (string, string) {
	name, def, hasDef := strings.Cut(body, ":-")
	if !validVarName(name) {
		return "", fmt.Sprintf("${%s}: not a valid environment variable name", body)
	}
	val, ok := env(name)
	switch {
	case hasDef && val == "":
		val = def
	case !ok:
		return "", fmt.Sprintf("environment variable %s is not set (use ${%s:-default} for an optional value)", name, name)
	}
	if strings.ContainsAny(val, "\r\n") {
		return "", fmt.Sprintf("environment variable %s contains a line break, which cannot be expanded into YAML", name)
	}
	return val, ""
}

func validVarName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// splitComment splits a YAML line into code and comment. A '#' starts a comment at the start
// of the line or after whitespace, outside quotes. A quote opens a quoted scalar only where a
// scalar can start, so the apostrophe in a plain "it's" is not mistaken for one. Quoted scalars
// spanning lines are rare in configs and are treated line by line.
func splitComment(line string) (code, comment string) {
	var quote byte
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote == '"':
			if c == '\\' {
				i++
			} else if c == '"' {
				quote = 0
			}
		case quote == '\'':
			if c == '\'' && i+1 < len(line) && line[i+1] == '\'' {
				i++
			} else if c == '\'' {
				quote = 0
			}
		case c == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return line[:i], line[i:]
		case (c == '"' || c == '\'') && (i == 0 || strings.IndexByte(" \t[{,:-", line[i-1]) >= 0):
			quote = c
		}
	}
	return line, ""
}
