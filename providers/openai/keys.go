package openai

import (
	"bytes"
	"unicode/utf8"
)

// foldsTo reports whether encoding/json would decode a member whose key is not written as any
// of names into a field named one of them: it matches names without regard to case, Unicode's
// simple folding included (bytes.EqualFold: "ſ" is an "s", "K" a "k"). The single-pass
// scanners use it to leave such a key to encoding/json, which alone reads it as it would.
//
// An ASCII first byte folds only to its own other case, so it rules out most keys before any
// comparison; a key that starts with a byte beyond ASCII is compared whole.
func foldsTo(key []byte, names ...string) bool {
	if len(key) == 0 {
		return false
	}
	for _, name := range names {
		if key[0] < utf8.RuneSelf && key[0]|0x20 != name[0]|0x20 {
			continue
		}
		if bytes.EqualFold(key, []byte(name)) {
			return true
		}
	}
	return false
}
