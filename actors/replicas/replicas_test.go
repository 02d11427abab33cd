package replicas

import (
	"strings"
	"testing"
)

// TestParseCooldown: every name BreakerScope and KeyScope make reads back as what made it,
// and every other name is refused.
func TestParseCooldown(t *testing.T) {
	tests := []struct {
		name string
		want Cooldown
		ok   bool
	}{
		{BreakerScope("codex"), Cooldown{Provider: "codex", Breaker: true}, true},
		{KeyScope("openai", 0, 2), Cooldown{Provider: "openai", Pool: 0, Key: 2}, true},
		{KeyScope("openai", 3, 0), Cooldown{Provider: "openai", Pool: 3}, true},
		{"breaker/", Cooldown{}, false},
		{"key/openai/0", Cooldown{}, false},
		{"key/openai/0/1/2", Cooldown{}, false},
		{"key//0/1", Cooldown{}, false},
		{"key/openai/x/1", Cooldown{}, false},
		{"key/openai/-1/1", Cooldown{}, false},
		{RateScope("openai"), Cooldown{}, false},
		{ProviderScope("openai"), Cooldown{}, false},
		{"", Cooldown{}, false},
	}
	for _, tt := range tests {
		got, ok := ParseCooldown(tt.name)
		if ok != tt.ok || got != tt.want {
			t.Errorf("ParseCooldown(%q) = %+v, %v; want %+v, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

// FuzzParseCooldown: a name that parses is exactly the name its parts make again.
func FuzzParseCooldown(f *testing.F) {
	for _, s := range []string{"breaker/p", "key/p/0/1", "key/p/01/1", "key/p/+1/1", "key/a/b/0/1", "rpm/p"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		c, ok := ParseCooldown(name)
		if !ok {
			return
		}
		again := KeyScope(c.Provider, c.Pool, c.Key)
		if c.Breaker {
			again = BreakerScope(c.Provider)
		}
		if c2, ok2 := ParseCooldown(again); !ok2 || c2 != c {
			t.Fatalf("%q parsed as %+v, which names %q, which parses as %+v, %v", name, c, again, c2, ok2)
		}
	})
}

// TestAffinityScope: a conversation's shared name is the same for every replica, differs
// between conversations, and is a short printable name whatever the client sent, without
// what it sent.
func TestAffinityScope(t *testing.T) {
	long := string(make([]byte, 10_000))
	names := map[string]string{}
	for _, conv := range []string{"one", "One", "user_abc_account_x_session_9f1c", "with space|and bar", "日本語", long} {
		n := AffinityScope(conv)
		if n != AffinityScope(conv) {
			t.Fatalf("%q: two names", conv)
		}
		if len(n) != len("affinity/")+32 || n[:9] != "affinity/" {
			t.Errorf("%q: name %q, want affinity/ and 32 hex digits", conv, n)
		}
		for i := range len(n) {
			if c := n[i]; c <= ' ' || c > '~' || c == '|' {
				t.Errorf("%q: name %q has byte %q", conv, n, c)
			}
		}
		if len(conv) > 3 && len(conv) < 100 && strings.Contains(n, conv) {
			t.Errorf("%q: the name %q holds it", conv, n)
		}
		if other, dup := names[n]; dup {
			t.Errorf("%q and %q share the name %q", conv, other, n)
		}
		names[n] = conv
	}
}
