package openai

import "testing"

func TestFoldsTo(t *testing.T) {
	for _, tt := range []struct {
		key  string
		want bool
	}{
		{"Usage", true}, {"USAGE", true}, {"uſage", true}, {"choiceſ", true}, {"CHOICES", true},
		{"usag", false}, {"usages", false}, {"id", false}, {"", false}, {"\u212aey", false},
	} {
		if got := foldsTo([]byte(tt.key), "usage", "choices"); got != tt.want {
			t.Errorf("foldsTo(%q) = %v, want %v", tt.key, got, tt.want)
		}
	}
	if !foldsTo([]byte("\u212aey"), "key") { // a Kelvin sign starts a key that folds to "key"
		t.Error(`foldsTo("\u212aey", "key") = false`)
	}
}
