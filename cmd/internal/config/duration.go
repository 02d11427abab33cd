package config

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"
)

// Duration is a time.Duration written in YAML with a unit: "60s", "5m", "250ms", "1h30m".
// A bare number is rejected because "60" could mean seconds or nanoseconds.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats d like time.Duration ("1m0s").
func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalYAML parses a duration scalar. The error never quotes a value that is not a
// number, so a key pasted into the wrong field is not echoed. Errors are *yaml.TypeError so
// the decoder carries on with the other fields instead of stopping at the first.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	fail := func(format string, args ...any) error {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf(format, args...)}}
	}
	if n.Kind != yaml.ScalarNode {
		return fail("expected a duration such as 60s, got a %s", nodeKindName(n))
	}
	if n.Tag == "!!int" || n.Tag == "!!float" {
		return fail("%s has no unit: use a unit, e.g. %ss", n.Value, n.Value)
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fail("not a duration: use a number with a unit, e.g. 60s, 5m, 250ms")
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes d in the same form UnmarshalYAML reads.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// nodeKindName names a YAML node kind for error messages.
func nodeKindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.AliasNode:
		return "alias"
	case yaml.DocumentNode:
		return "document"
	}
	switch n.Tag {
	case "!!null":
		return "null"
	case "!!int":
		return "integer"
	case "!!float":
		return "number"
	case "!!bool":
		return "boolean"
	case "!!str":
		return "string"
	}
	return "scalar"
}
