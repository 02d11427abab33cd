package upstream

import (
	"regexp"
	"strings"
)

// A backend that refuses a call's key (401/403) may mean the key itself (invalid, revoked,
// disabled: no model will take it) or only what was asked (this model, this action, for a
// key that is otherwise good). SPEC §10 sets aside the key in the first case and only the
// (key, model) pair in the second; a 403 is the second unless the backend says otherwise,
// which the adapters read with KeyInvalid (docs/capacity-signals.md, "Refused keys").

// keyCodes are error codes and types (lower-cased) that name the key itself, whatever the
// status: the kinds' invalid-key codes (PROTOCOLS §1, §3, §5, §7) and a refusal of every
// call from where the key is used.
var keyCodes = map[string]bool{
	"invalid_api_key":                      true, // OpenAI
	"invalidapikey":                        true, // DashScope
	"authentication_error":                 true, // Anthropic, also with a 403
	"authenticationerror":                  true, // Volcengine Ark
	"unauthenticated":                      true, // Google's status
	"account_deactivated":                  true, // OpenAI
	"unsupported_country_region_territory": true, // OpenAI: no model serves from here
}

// keyMessage finds a message that says the key (or token) is invalid or disabled, in
// either order: "API key not valid", "Incorrect API key provided", "This API key has been
// disabled", "token expired". A permission the key lacks ("Your API key does not have
// permission to use the specified resource") is not one.
var keyMessage = regexp.MustCompile(`(?i)\b(api[ _-]?key|key|token)\b[^.;]{0,40}?\b(invalid|not valid|incorrect|disabled|revoked|deactivated|suspended|expired|blocked)\b` +
	`|\b(invalid|incorrect|disabled|revoked|deactivated|suspended|expired)\b[^.;]{0,20}?\b(api[ _-]?key|key|token)\b`)

// KeyInvalid reports whether a refusal's code (or type) and message say the key itself is
// invalid, revoked or disabled, not only that it may not do what was asked.
func KeyInvalid(code, message string) bool {
	return keyCodes[strings.ToLower(code)] || keyMessage.MatchString(message)
}
