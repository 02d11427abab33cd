package httpapi

import (
	"encoding/base64"
	"strings"
	"testing"
)

// FuzzBadBase64: badBase64, which decodes in a small buffer, refuses exactly what decoding
// the whole string refuses (padding optional, line breaks skipped), and every encoding of
// any bytes, padded or not, is taken.
func FuzzBadBase64(f *testing.F) {
	for _, s := range []string{"", "iVBORw0KGgo=", "iVBORw0KGgo", "not base64!", "AAAA\nAAAA", "A", "AB==", "AB=", "-_-_", "QUJD\r\n"} {
		f.Add([]byte(s), s)
	}
	f.Fuzz(func(t *testing.T, raw []byte, s string) {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding} {
			if e := enc.EncodeToString(raw); badBase64(e) || badBase64(e+"\n") {
				t.Fatalf("refused %q, the encoding of %q", e, raw)
			}
		}
		flat := strings.NewReplacer("\r", "", "\n", "").Replace(s)
		_, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(flat, "="))
		if got, want := badBase64(s), err != nil; got != want {
			t.Fatalf("badBase64(%q) = %v, decoding it whole says %v (%v)", s, got, want, err)
		}
		if a := checkImageURL("url", "data:image/png;base64,"+s); (a != nil) != (err != nil) {
			t.Fatalf("checkImageURL of base64 %q: %v, decoding says %v", s, a, err)
		}
	})
}
