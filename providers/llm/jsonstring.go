package llm

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// StringValue returns the text of data, a JSON string literal, as encoding/json decodes it:
// escapes resolved, a lone UTF-16 surrogate and every byte that is not UTF-8 replaced by
// U+FFFD. ok is false when data is not exactly one string literal.
//
// It is for a literal a decoder has already checked: an UnmarshalJSON argument, or a
// json.RawMessage the decoder filled. json.Unmarshal would check every byte of it again
// before decoding, and in a coding agent's request, where a content holds a whole file and
// the Responses and Messages forms nest contents in contents, those checks were most of the
// time the request's decoding took (BenchmarkParse in httpapi). Decoding the literal takes one
// pass, which also checks what a literal needs (its quotes, escapes and no control
// character), so data from anywhere gets the right answer or false; FuzzStringValue holds it
// to encoding/json's.
func StringValue(data []byte) (s string, ok bool) {
	if len(data) < 2 || data[0] != '"' || data[len(data)-1] != '"' {
		return "", false
	}
	text := data[1 : len(data)-1]
	plain := plainRun(text)
	if plain == len(text) {
		return string(text), true // nothing to decode, as is usual for short values
	}
	var b strings.Builder
	b.Grow(len(text)) // the decoded text is never longer than its literal
	for i := 0; ; {
		b.Write(text[i : i+plain])
		if i += plain; i == len(text) {
			return b.String(), true
		}
		n := decodeOne(&b, text[i:])
		if n == 0 {
			return "", false
		}
		i += n
		plain = plainRun(text[i:])
	}
}

// plainRun is how many bytes text starts with that stand for themselves in a literal:
// printable ASCII other than a quote or a backslash.
func plainRun(text []byte) int {
	for i, c := range text {
		if c < ' ' || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			return i
		}
	}
	return len(text)
}

// decodeOne writes what the escape or the non-ASCII character text starts with stands for
// and returns how many bytes of text it took; 0 when text starts with something a string
// literal cannot hold (a quote, a control character, a bad escape).
func decodeOne(b *strings.Builder, text []byte) int {
	c := text[0]
	if c >= utf8.RuneSelf {
		r, size := utf8.DecodeRune(text)
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError) // not UTF-8: replaced, as encoding/json does
		} else {
			b.Write(text[:size])
		}
		return size
	}
	if c != '\\' || len(text) < 2 {
		return 0
	}
	if c := escaped(text[1]); c != 0 {
		b.WriteByte(c)
		return 2
	}
	if text[1] != 'u' {
		return 0
	}
	r := hex4(text[2:])
	if r < 0 {
		return 0
	}
	if !utf16.IsSurrogate(r) {
		b.WriteRune(r)
		return 6
	}
	// A surrogate pair is two escapes; a half alone, or a pair that does not decode, is
	// replaced and the escape after it read on its own, as encoding/json does.
	if len(text) >= 12 && text[6] == '\\' && text[7] == 'u' {
		if r2 := hex4(text[8:]); r2 >= 0 {
			if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
				b.WriteRune(dec)
				return 12
			}
		}
	}
	b.WriteRune(utf8.RuneError)
	return 6
}

// escaped is the character a one-letter escape stands for; 0 when c starts no such escape.
func escaped(c byte) byte {
	switch c {
	case '"', '\\', '/':
		return c
	case 'b':
		return '\b'
	case 'f':
		return '\f'
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	}
	return 0
}

// hex4 is the value of the four hex digits text starts with; -1 when it does not.
func hex4(text []byte) rune {
	if len(text) < 4 {
		return -1
	}
	var r rune
	for _, c := range text[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}
