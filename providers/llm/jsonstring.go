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
	i := plainRun(text)
	if i == len(text) {
		return string(text), true // nothing to decode, as is usual for short values
	}
	// Escapes decode shorter than they are written; only a byte that is not UTF-8 grows (to
	// U+FFFD's three bytes), and the builder makes room for that.
	var out strings.Builder
	out.Grow(len(text))
	out.Write(text[:i])
	for i < len(text) {
		c := text[i]
		switch {
		case plainASCII[c]:
			n := plainRun(text[i:])
			out.Write(text[i : i+n])
			i += n
		case c == '\\' && i+1 < len(text) && unescape[text[i+1]] != 0:
			out.WriteByte(unescape[text[i+1]])
			i += 2
		case c == '\\':
			r, n := unicodeEscape(text[i:])
			if n == 0 {
				return "", false
			}
			out.WriteRune(r)
			i += n
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(text[i:])
			if r == utf8.RuneError && size == 1 {
				out.WriteRune(utf8.RuneError) // not UTF-8: replaced, as encoding/json does
			} else {
				out.Write(text[i : i+size])
			}
			i += size
		default:
			return "", false // a quote or a control character
		}
	}
	return out.String(), true
}

// plainASCII marks the bytes that stand for themselves in a string literal: printable ASCII
// other than a quote or a backslash.
var plainASCII = func() (t [256]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// unescape maps the letter of a one-letter escape to the character it stands for; 0 for
// every other byte.
var unescape = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// plainRun is how many bytes text starts with that stand for themselves.
func plainRun(text []byte) int {
	for i, c := range text {
		if !plainASCII[c] {
			return i
		}
	}
	return len(text)
}

// unicodeEscape returns the character the \u escape text starts with stands for and how many
// bytes of text it took; 0 bytes when text does not start with one.
func unicodeEscape(text []byte) (rune, int) {
	if len(text) < 6 || text[1] != 'u' {
		return 0, 0
	}
	r := hex4(text[2:])
	if r < 0 {
		return 0, 0
	}
	if !utf16.IsSurrogate(r) {
		return r, 6
	}
	// A surrogate pair is two escapes; a half alone, or a pair that does not decode, is
	// replaced and the escape after it read on its own, as encoding/json does.
	if len(text) >= 12 && text[6] == '\\' && text[7] == 'u' {
		if r2 := hex4(text[8:]); r2 >= 0 {
			if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
				return dec, 12
			}
		}
	}
	return utf8.RuneError, 6
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
