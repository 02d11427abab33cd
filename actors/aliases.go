package actors

import (
	"sort"
	"strings"
)

// Wildcard aliases (SPEC §13). Clients send model names of their own (Claude Code's
// "claude-sonnet-4-5-20250929", Codex's "gpt-5-codex"); an alias ending in '*' maps every
// name it is a prefix of. A model's wildcard alias ("claude-*" on demo/echo) leads to that
// model; a provider's ("claude-*" on anthropic) leads to the provider's model of the same
// name as the client sent ("anthropic/claude-sonnet-4-5-20250929").

// wildcard is one alias pattern.
type wildcard struct {
	prefix string // the pattern without its trailing '*'
	// target is the model id the pattern leads to, or, when it ends in "/*", the provider
	// whose model of the client's name it leads to.
	target string
}

// isWildcard reports whether an alias is a pattern.
func isWildcard(alias string) bool { return strings.HasSuffix(alias, "*") }

// sortWildcards orders patterns longest prefix first, so the most specific one wins; among
// patterns of one length the configuration's order stays.
func sortWildcards(ws []wildcard) {
	sort.SliceStable(ws, func(i, j int) bool { return len(ws[i].prefix) > len(ws[j].prefix) })
}

// resolveAlias returns the model id a client's name leads to: the name itself when it is an
// id or a plain alias (exact), else the target of the first pattern (ws sorted by
// sortWildcards) whose prefix it has. ok is false when nothing matches.
func resolveAlias(name string, exact func(string) bool, ws []wildcard) (id string, ok bool) {
	if exact(name) {
		return name, true
	}
	for _, w := range ws {
		if !strings.HasPrefix(name, w.prefix) {
			continue
		}
		if provider, found := strings.CutSuffix(w.target, "/*"); found {
			return provider + "/" + name, true
		}
		return w.target, true
	}
	return "", false
}

// lookup is the route of a client's model name, through the wildcard aliases.
func (t *modelTable) lookup(name string) (route, bool) {
	id, ok := resolveAlias(name, func(s string) bool { _, ok := t.routes[s]; return ok }, t.wildcards)
	if !ok {
		return route{}, false
	}
	r, ok := t.routes[id]
	return r, ok
}
