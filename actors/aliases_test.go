package actors

import "testing"

func TestResolveAlias(t *testing.T) {
	ids := map[string]bool{"demo/echo": true, "anthropic/claude-sonnet-4-5": true, "codex": true}
	ws := []wildcard{
		{prefix: "claude-", target: "anthropic/*"},
		{prefix: "claude-haiku-", target: "demo/echo"},
		{prefix: "gpt-5", target: "demo/echo"},
		{prefix: "", target: "demo/echo"}, // "*": everything else
	}
	sortWildcards(ws)
	exact := func(s string) bool { return ids[s] }
	for _, tc := range []struct{ name, want string }{
		{"demo/echo", "demo/echo"},                           // an id is itself
		{"codex", "codex"},                                   // so is a plain alias
		{"claude-sonnet-4-5", "anthropic/claude-sonnet-4-5"}, // provider pattern: the client's name at it
		{"claude-haiku-4-5", "demo/echo"},                    // the longer prefix wins
		{"gpt-5-codex", "demo/echo"},
		{"gpt-4o", "demo/echo"}, // only "*" matches
	} {
		got, ok := resolveAlias(tc.name, exact, ws)
		if !ok || got != tc.want {
			t.Errorf("%q → %q, %v; want %q", tc.name, got, ok, tc.want)
		}
	}
	if got, ok := resolveAlias("gpt-4o", exact, ws[:len(ws)-1]); ok {
		t.Errorf("without \"*\", gpt-4o → %q; want no match", got)
	}
}

// TestWildcardRoute: a model's pattern and a provider's pattern route real calls.
func TestWildcardRoute(t *testing.T) {
	tab := &modelTable{routes: map[string]route{}}
	tab.routes["demo/echo"] = route{id: "demo/echo"}
	tab.routes["anthropic/claude-x"] = route{id: "anthropic/claude-x"}
	tab.wildcards = []wildcard{{prefix: "claude-", target: "anthropic/*"}, {prefix: "gpt-", target: "demo/echo"}}
	sortWildcards(tab.wildcards)
	for name, want := range map[string]string{"claude-x": "anthropic/claude-x", "gpt-5-codex": "demo/echo", "claude-y": "", "other": ""} {
		r, ok := tab.lookup(name)
		if ok != (want != "") || r.id != want {
			t.Errorf("lookup(%q) = %q, %v; want %q", name, r.id, ok, want)
		}
	}
}
