package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// Changes is what a reload changes, old → new (Reloaded): what is applied, and what needs a
// restart and is not. Values are shown for numbers, durations and names only: keys,
// environment variables and prompts never appear (they are counted or named as changed).
type Changes struct {
	// Restart lists the settings that differ but need a restart, with old → new (keys and
	// secrets only named): the listener, auth, the HTTP server's limits, /metrics access,
	// the drain timings. The config in force keeps their old values.
	Restart []string `json:"needs_restart"`
	// Limits lists the gateway-wide settings applied ("limits.max_running: 10 → 4").
	Limits  []string         `json:"limits"`
	Added   []string         `json:"providers_added"`
	Removed []string         `json:"providers_removed"`
	Changed []ProviderChange `json:"providers_changed"`
	Routes  []string         `json:"routes"`
	// Rebuilt are the providers that were out of service and that the reload rebuilt with
	// fresh actors (set by the app from the gateway's answer, not by Reloaded).
	Rebuilt   []string `json:"providers_rebuilt,omitempty"`
	Unchanged bool     `json:"unchanged"`
}

// ProviderChange is one provider that stays, and how it changed.
type ProviderChange struct {
	Name    string   `json:"name"`
	Changes []string `json:"changes"`
}

// restartLimits are the limits the HTTP server and the adapters take at start only.
var restartLimits = []string{"max_body_bytes", "max_event_bytes", "header_timeout", "body_timeout", "idle_timeout",
	"max_header_bytes", "max_conns_per_client", "write_timeout", "affinity_ttl", "affinity_max"}

// Reloaded is the config in force after reloading next over old, with what changes: next,
// except that the settings that need a restart keep their old values (listen, auth,
// metrics, the drain timings and the limits in restartLimits). Both must be valid.
func Reloaded(old, next *Config) (*Config, Changes) {
	in := *next
	var ch Changes
	restart := func(name string, changed bool, show string) {
		if changed {
			ch.Restart = append(ch.Restart, name+show)
		}
	}
	restart("listen", old.Listen != next.Listen, ": "+old.Listen+" → "+next.Listen)
	restart("auth.api_keys", !reflect.DeepEqual(old.Auth.APIKeys, next.Auth.APIKeys), "")
	restart("store", !reflect.DeepEqual(old.Store, next.Store), "")
	restart("auth.admin_keys", !slices.Equal(old.Auth.AdminKeys, next.Auth.AdminKeys), "")
	restart("auth.allowed_hosts", !slices.Equal(old.Auth.AllowedHosts, next.Auth.AllowedHosts), "")
	restart("auth.allowed_origins", !slices.Equal(old.Auth.AllowedOrigins, next.Auth.AllowedOrigins), "")
	restart("metrics.public", old.Metrics != next.Metrics, fmt.Sprintf(": %v → %v", old.Metrics.Public, next.Metrics.Public))
	restart("drain_delay", old.DrainDelay != next.DrainDelay, ": "+old.DrainDelay.String()+" → "+next.DrainDelay.String())
	restart("drain_grace", old.DrainGrace != next.DrainGrace, ": "+old.DrainGrace.String()+" → "+next.DrainGrace.String())
	// The lease engine connects once, at start (no value shown: the section holds a password).
	restart("cluster", !reflect.DeepEqual(old.Cluster, next.Cluster), "")
	in.Listen, in.Auth, in.Metrics, in.DrainDelay, in.DrainGrace = old.Listen, old.Auth, old.Metrics, old.DrainDelay, old.DrainGrace
	in.Cluster, in.Store = old.Cluster, old.Store
	in.Limits = next.Limits
	for _, f := range fieldDiffs(reflect.ValueOf(old.Limits), reflect.ValueOf(next.Limits), nil) {
		name, _, _ := strings.Cut(f, ":")
		if slices.Contains(restartLimits, name) {
			ch.Restart = append(ch.Restart, "limits."+f)
			keepField(&in.Limits, &old.Limits, name)
			continue
		}
		ch.Limits = append(ch.Limits, "limits."+f)
	}
	was := map[string]*Provider{}
	for i := range old.Providers {
		was[old.Providers[i].Name] = &old.Providers[i]
	}
	for i := range next.Providers {
		p := &next.Providers[i]
		o, ok := was[p.Name]
		if !ok {
			ch.Added = append(ch.Added, p.Name)
			continue
		}
		delete(was, p.Name)
		if d := providerDiffs(o, p); len(d) > 0 {
			ch.Changed = append(ch.Changed, ProviderChange{Name: p.Name, Changes: d})
		}
	}
	for i := range old.Providers {
		if _, gone := was[old.Providers[i].Name]; gone {
			ch.Removed = append(ch.Removed, old.Providers[i].Name)
		}
	}
	ch.Routes = routeDiffs(old.Routes, next.Routes)
	ch.Unchanged = len(ch.Restart)+len(ch.Limits)+len(ch.Added)+len(ch.Removed)+len(ch.Changed)+len(ch.Routes) == 0
	return &in, ch
}

// keepField sets the field of l whose yaml name is name to old's value.
func keepField(l, old *Limits, name string) {
	v, o := reflect.ValueOf(l).Elem(), reflect.ValueOf(old).Elem()
	for i := range v.NumField() {
		if yamlName(v.Type().Field(i)) == name {
			v.Field(i).Set(o.Field(i))
		}
	}
}

// secretFields are shown as changed, never with their values.
var secretFields = map[string]bool{"keys": true, "env": true, "args": true, "base_url": true}

// skipped are compared elsewhere or not at all (Discovered is not configuration).
var skipped = map[string]bool{"name": true, "models": true, "-": true}

// fieldDiffs lists the fields of two structs of one type that differ, by yaml name:
// "lanes: 4 → 2", or "keys: changed" for secrets.
func fieldDiffs(a, b reflect.Value, out []string) []string {
	for i := range a.NumField() {
		name := yamlName(a.Type().Field(i))
		x, y := a.Field(i), b.Field(i)
		if skipped[name] || reflect.DeepEqual(x.Interface(), y.Interface()) {
			continue
		}
		if secretFields[name] {
			out = append(out, name+": changed")
			continue
		}
		out = append(out, fmt.Sprintf("%s: %s → %s", name, show(x), show(y)))
	}
	return out
}

func show(v reflect.Value) string {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return "none"
		}
		v = v.Elem()
	}
	if s, ok := v.Interface().(fmt.Stringer); ok {
		return s.String()
	}
	if v.Kind() == reflect.Struct {
		var parts []string
		for i := range v.NumField() {
			parts = append(parts, fmt.Sprintf("%s %v", yamlName(v.Type().Field(i)), v.Field(i).Interface()))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return fmt.Sprint(v.Interface())
}

func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "" {
		return strings.ToLower(f.Name)
	}
	return name
}

// providerDiffs lists how a provider that stays changes: its own fields, then its models.
func providerDiffs(o, p *Provider) []string {
	out := fieldDiffs(reflect.ValueOf(*o), reflect.ValueOf(*p), nil)
	if o.Discovered != p.Discovered {
		out = slices.DeleteFunc(out, func(s string) bool { return strings.HasPrefix(s, "discovered") })
	}
	had := map[string]*Model{}
	for i := range o.Models {
		had[o.Models[i].ID] = &o.Models[i]
	}
	var added []string
	for i := range p.Models {
		m := &p.Models[i]
		om, ok := had[m.ID]
		if !ok {
			added = append(added, m.ID)
			continue
		}
		delete(had, m.ID)
		for _, d := range fieldDiffs(reflect.ValueOf(*om), reflect.ValueOf(*m), nil) {
			out = append(out, "models["+m.ID+"]."+d)
		}
	}
	if len(added) > 0 {
		out = append(out, "models added: "+strings.Join(added, ", "))
	}
	var removed []string
	for i := range o.Models {
		if _, gone := had[o.Models[i].ID]; gone {
			removed = append(removed, o.Models[i].ID)
		}
	}
	if len(removed) > 0 {
		out = append(out, "models removed: "+strings.Join(removed, ", "))
	}
	return out
}

// routeDiffs names the routes added, removed and changed.
func routeDiffs(old, next []Route) []string {
	was := map[string]*Route{}
	for i := range old {
		was[old[i].Name] = &old[i]
	}
	var out []string
	for i := range next {
		r := &next[i]
		o, ok := was[r.Name]
		switch {
		case !ok:
			out = append(out, "added: "+r.Name)
		case !reflect.DeepEqual(*o, *r):
			out = append(out, "changed: "+r.Name)
		}
		delete(was, r.Name)
	}
	for _, r := range old {
		if _, gone := was[r.Name]; gone {
			out = append(out, "removed: "+r.Name)
		}
	}
	return out
}

// Lines is the changes as the reload's log line and answer state them.
func (c Changes) Lines() []string {
	var out []string
	add := func(what string, items []string) {
		if len(items) > 0 {
			out = append(out, what+": "+strings.Join(items, "; "))
		}
	}
	add("needs a restart, not applied", c.Restart)
	add("limits", c.Limits)
	add("providers added", c.Added)
	add("providers removed (they finish what they run and have queued)", c.Removed)
	for _, p := range c.Changed {
		add("provider "+p.Name, p.Changes)
	}
	add("routes", c.Routes)
	add("providers rebuilt (they were out of service)", c.Rebuilt)
	if len(out) == 0 {
		out = append(out, "nothing changed")
	}
	return out
}
