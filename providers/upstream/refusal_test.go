package upstream

import "testing"

func TestKeyInvalid(t *testing.T) {
	tests := []struct {
		code, message string
		want          bool
	}{
		{"invalid_api_key", "Incorrect API key provided: sk-...abcd.", true}, // OpenAI 401
		{"", "Incorrect API key provided.", true},
		{"authentication_error", "invalid x-api-key", true},  // Anthropic
		{"InvalidApiKey", "Invalid API-key provided.", true}, // DashScope 401
		{"", "API key not valid. Please pass a valid API key.", true},
		{"", "This API key has been disabled by its owner", true},
		{"", "The access token has expired", true},
		{"unsupported_country_region_territory", "Country, region, or territory not supported.", true},
		// A permission the key lacks: the model (or action) only.
		{"permission_error", "Your API key does not have permission to use the specified resource.", false},
		{"Model.AccessDenied", "Model access denied.", false},
		{"AccessDenied.Unpurchased", "Access to model denied. Please make sure you are eligible for using the model.", false},
		{"PERMISSION_DENIED", "Permission denied on resource project.", false},
		{"", "You are not allowed to sample from this model", false},
		{"", "", false},
	}
	for _, tt := range tests {
		if got := KeyInvalid(tt.code, tt.message); got != tt.want {
			t.Errorf("KeyInvalid(%q, %q) = %v, want %v", tt.code, tt.message, got, tt.want)
		}
	}
}

// FuzzKeyInvalid: any code and message are answered, and a known key code decides
// whatever the message.
func FuzzKeyInvalid(f *testing.F) {
	f.Add("invalid_api_key", "x")
	f.Add("", "API key not valid")
	f.Fuzz(func(t *testing.T, code, message string) {
		got := KeyInvalid(code, message)
		if keyCodes[code] && !got {
			t.Fatalf("code %q names the key but KeyInvalid is false", code)
		}
	})
}
