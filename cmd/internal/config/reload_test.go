package config

import (
	"reflect"
	"strings"
	"testing"
)

const reloadBase = `
listen: 127.0.0.1:9000
auth: {api_keys: ["client-key-000001"]}
limits: {max_running: 10, max_admitted: 16, max_body_bytes: 1048576}
providers:
  - name: a
    kind: openai
    base_url: http://127.0.0.1:1/v1
    keys: ["sk-secret-aaaa", "sk-secret-bbbb"]
    lanes: 4
    models:
      - id: m1
      - id: m2
  - name: b
    kind: fake
    models: [{id: echo}]
routes:
  - name: r
    rules: [{model: a/m1}]
`

func TestReloaded(t *testing.T) {
	cases := []struct {
		name string
		edit func(string) string
		want Changes
		// inForce checks what the config in force kept.
		inForce func(t *testing.T, c *Config)
	}{
		{name: "nothing", edit: func(s string) string { return s }, want: Changes{Unchanged: true}},
		{
			name: "caps and lanes",
			edit: func(s string) string {
				s = strings.Replace(s, "max_running: 10", "max_running: 4", 1)
				return strings.Replace(s, "lanes: 4", "lanes: 2", 1)
			},
			want: Changes{Limits: []string{"limits.max_running: 10 → 4"},
				// model_lanes follow: omitted, they take the kind's default capped at lanes.
				Changed: []ProviderChange{{Name: "a", Changes: []string{"lanes: 4 → 2", "model_lanes: 4 → 2",
					"models[m1].model_lanes: 4 → 2", "models[m2].model_lanes: 4 → 2"}}}},
		},
		{
			name: "a key replaced, never shown",
			edit: func(s string) string { return strings.Replace(s, "sk-secret-bbbb", "sk-secret-cccc", 1) },
			want: Changes{Changed: []ProviderChange{{Name: "a", Changes: []string{"keys: changed"}}}},
		},
		{
			name: "providers and models added and removed",
			edit: func(s string) string {
				s = strings.Replace(s, "      - id: m2\n", "      - id: m3\n        model_lanes: 2\n", 1)
				return strings.Replace(s, "  - name: b\n    kind: fake\n", "  - name: c\n    kind: fake\n", 1)
			},
			want: Changes{Added: []string{"c"}, Removed: []string{"b"},
				Changed: []ProviderChange{{Name: "a", Changes: []string{"models added: m3", "models removed: m2"}}}},
		},
		{
			name: "restart-only settings are reported and kept",
			edit: func(s string) string {
				s = strings.Replace(s, "127.0.0.1:9000", "127.0.0.1:9001", 1)
				s = strings.Replace(s, "client-key-000001", "client-key-000002", 1)
				return strings.Replace(s, "max_body_bytes: 1048576", "max_body_bytes: 2048", 1)
			},
			want: Changes{Restart: []string{"listen: 127.0.0.1:9000 → 127.0.0.1:9001", "auth.api_keys", "limits.max_body_bytes: 1048576 → 2048"}},
			inForce: func(t *testing.T, c *Config) {
				if c.Listen != "127.0.0.1:9000" || c.Auth.APIKeys[0].Key != "client-key-000001" || c.Limits.MaxBodyBytes != 1048576 {
					t.Errorf("the config in force took a restart-only setting: %s %d", c.Listen, c.Limits.MaxBodyBytes)
				}
			},
		},
		{
			name: "allowed hosts and origins need a restart",
			edit: func(s string) string {
				return strings.Replace(s, `auth: {api_keys: ["client-key-000001"]}`,
					`auth: {api_keys: ["client-key-000001"], allowed_hosts: [gw.example.com], allowed_origins: ["https://app.example.com"]}`, 1)
			},
			want: Changes{Restart: []string{"auth.allowed_hosts", "auth.allowed_origins"}},
			inForce: func(t *testing.T, c *Config) {
				if len(c.Auth.AllowedHosts)+len(c.Auth.AllowedOrigins) != 0 {
					t.Errorf("the config in force took allowed hosts or origins: %q %q", c.Auth.AllowedHosts, c.Auth.AllowedOrigins)
				}
			},
		},
		{
			name: "a route changed",
			edit: func(s string) string {
				return strings.Replace(s, "rules: [{model: a/m1}]", "rules: [{model: b/echo}]", 1)
			},
			want: Changes{Routes: []string{"changed: r"}},
		},
	}
	old := parse(t, reloadBase)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			next := parse(t, tc.edit(reloadBase))
			in, got := Reloaded(old, next)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("changes\n got %+v\nwant %+v", got, tc.want)
			}
			for _, line := range got.Lines() {
				if strings.Contains(line, "sk-secret") || strings.Contains(line, "client-key") {
					t.Errorf("a secret in %q", line)
				}
			}
			if tc.inForce != nil {
				tc.inForce(t, in)
			}
		})
	}
}

func parse(t *testing.T, yaml string) *Config {
	t.Helper()
	c, err := Parse("reload.yaml", []byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return c
}
