package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Load reads the YAML config at path, expands ${VAR} from the process environment, parses,
// applies defaults and validates. The error names the file, line and field of every problem.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(path, data, os.LookupEnv)
}

// Parse is Load on bytes already read: name is used in messages and as Config.Source, env
// resolves ${VAR} (os.LookupEnv in production). Every problem found is reported at once:
// an unset variable expands to "" so the rest of the file is still checked, and problems on
// the line of an expansion error are not reported twice.
func Parse(name string, data []byte, env func(string) (string, bool)) (*Config, error) {
	text, secrets, expErrs := expand(name, data, env)
	p := &problems{file: name, lines: map[string]int{}, list: expErrs}
	root, ferr := parseTree(name, text, secrets)
	if ferr != nil {
		p.list = append(p.list, ferr)
		return nil, p.err(secrets)
	}
	w := walker{p: p, set: p.lines}
	w.walk(root, reflect.TypeFor[Config](), "")
	secrets = append(secrets, w.secrets...)
	if w.visited >= maxNodes {
		return nil, p.err(secrets) // decoding would expand the same aliases
	}

	cfg := &Config{Source: name}
	dec := yaml.NewDecoder(bytes.NewReader(text))
	// Strict decoding when nothing was found yet; otherwise decode what can be decoded so
	// validation still reports the remaining problems in the same run.
	found := len(p.list)
	dec.KnownFields(found == 0)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) && found == 0 {
		// The walk checks everything the decoder does, with better messages; this is a
		// safety net, its value-quoting messages are sanitised.
		return nil, &FieldError{File: name, Msg: scrub(sanitizeYAML(err.Error()), secrets)}
	}
	// A field the walk rejected was not decoded: default it as if omitted, so its zero does
	// not spread into other fields (limits.queue_timeout feeds every provider).
	for _, e := range p.list[len(expErrs):] {
		delete(p.lines, e.Path)
	}
	applyDefaults(cfg, p.lines)
	validate(cfg, p)
	p.dropUnder(found)
	if err := p.err(append(secrets, cfg.secrets()...)); err != nil {
		return nil, err
	}
	return cfg, nil
}

// parseTree parses text into a YAML tree and returns its root node, or the syntax problem.
func parseTree(name string, text []byte, secrets []string) (*yaml.Node, *FieldError) {
	var doc yaml.Node
	if err := yaml.Unmarshal(text, &doc); err != nil {
		return nil, syntaxError(name, err, secrets)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	if root.Kind == 0 || root.Kind == yaml.DocumentNode || root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil, &FieldError{File: name, Msg: "empty config (see testdata/config/example.yaml for the shape)"}
	}
	return root, nil
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// syntaxError turns a YAML syntax error into a FieldError carrying its line.
func syntaxError(file string, err error, secrets []string) *FieldError {
	msg := sanitizeYAML(err.Error())
	line := 0
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = msg[len(m[0]):]
	}
	msg = strings.TrimPrefix(msg, "yaml: ")
	return &FieldError{File: file, Line: line, Msg: "invalid YAML: " + scrub(msg, secrets)}
}

var quotedValue = regexp.MustCompile("`[^`]*`")

// sanitizeYAML removes the quoted values yaml.v3 puts in its messages (a key pasted in the
// wrong place must not be echoed).
func sanitizeYAML(msg string) string { return quotedValue.ReplaceAllString(msg, "value") }

// walker checks a YAML tree against the Go types before decoding, so each problem is reported
// with its field path and line: unknown fields (with the valid names), wrong node kinds and
// values the field's type rejects. It records the line of every field present, which also
// tells an explicit "lanes: 0" from an omitted one.
type walker struct {
	p       *problems
	set     map[string]int
	secrets []string
	visited int // nodes walked, counting alias expansions; bounded by maxNodes
}

// maxNodes bounds the walk: YAML aliases can make a small file expand exponentially
// ("billion laughs"); no real config comes near this.
const maxNodes = 100_000

var (
	unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()
	clientKeyType   = reflect.TypeFor[ClientKey]()
)

// isSecretField reports whether the field at path holds a secret to scrub from messages.
func isSecretField(path string) bool {
	return path == "cluster.redis.password" || path == "store.postgres" ||
		strings.HasPrefix(path, "auth.api_keys[") && strings.HasSuffix(path, "].key")
}

func (w *walker) walk(n *yaml.Node, t reflect.Type, path string) {
	if w.visited++; w.visited == maxNodes {
		w.p.addAt(n.Line, path, "config too large: more than %d values after expanding aliases", maxNodes)
	}
	if w.visited >= maxNodes {
		return
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return // an empty value: leave the zero value, defaults or validation handle it
	}
	if t == clientKeyType && n.Kind == yaml.MappingNode {
		w.walkStruct(n, t, path) // a key object; its string form is a leaf
		return
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		w.decodeLeaf(n, t, path)
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		w.walk(n, t.Elem(), path)
	case reflect.Struct:
		w.walkStruct(n, t, path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			w.p.addAt(n.Line, path, "expected a list, got a %s", nodeKindName(n))
			return
		}
		for i, c := range n.Content {
			cp := fmt.Sprintf("%s[%d]", path, i)
			w.set[cp] = c.Line
			if isKeyList(path) && c.Kind == yaml.ScalarNode {
				w.secrets = append(w.secrets, c.Value)
			}
			w.walk(c, t.Elem(), cp)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			w.p.addAt(n.Line, path, "expected a mapping, got a %s", nodeKindName(n))
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			cp := path + "." + k.Value
			w.set[cp] = k.Line
			if strings.HasSuffix(path, ".env") && v.Kind == yaml.ScalarNode {
				w.secrets = append(w.secrets, v.Value) // env often carries credentials
			}
			w.walk(v, t.Elem(), cp)
		}
	default:
		w.decodeLeaf(n, t, path)
	}
}

func (w *walker) walkStruct(n *yaml.Node, t reflect.Type, path string) {
	if n.Kind != yaml.MappingNode {
		w.p.addAt(n.Line, path, "expected a mapping, got a %s", nodeKindName(n))
		return
	}
	fields := yamlFields(t)
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Value == "<<" && k.Tag == "!!merge" {
			// Merge key: the merged mapping's fields (or each listed mapping's) belong here.
			merged := []*yaml.Node{v}
			if v.Kind == yaml.SequenceNode {
				merged = v.Content
			}
			for _, m := range merged {
				w.walk(m, t, path)
			}
			continue
		}
		cp := joinPath(path, k.Value)
		f, ok := fields[k.Value]
		if !ok {
			w.p.addAt(k.Line, cp, "unknown field (valid: %s)", strings.Join(fieldNames(t), ", "))
			continue
		}
		if seen[k.Value] {
			w.p.addAt(k.Line, cp, "set twice")
			continue
		}
		seen[k.Value] = true
		if isSecretField(cp) && v.Kind == yaml.ScalarNode {
			w.secrets = append(w.secrets, v.Value)
		}
		if v.Kind != yaml.ScalarNode || v.Tag != "!!null" { // "lanes:" with no value counts as omitted
			w.set[cp] = k.Line
		}
		w.walk(v, f.Type, cp)
	}
}

// decodeLeaf decodes one value node into a fresh value of type t and reports a failure.
func (w *walker) decodeLeaf(n *yaml.Node, t reflect.Type, path string) {
	if n.Kind != yaml.ScalarNode {
		w.p.addAt(n.Line, path, "expected a %s, got a %s", typeName(t), nodeKindName(n))
		return
	}
	isInt := t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64
	if isInt && n.Tag == "!!float" && !reflect.PointerTo(t).Implements(unmarshalerType) {
		// yaml.v3 would silently truncate 1.5 to 1.
		w.p.addAt(n.Line, path, "expected a whole number, got a number with a fraction")
		return
	}
	if err := n.Decode(reflect.New(t).Interface()); err != nil {
		msg := err.Error()
		var te *yaml.TypeError
		switch {
		case errors.As(err, &te) && reflect.PointerTo(t).Implements(unmarshalerType):
			msg = strings.Join(te.Errors, "; ") // our own message, already value-safe
		case errors.As(err, &te):
			msg = fmt.Sprintf("expected a %s, got a %s", typeName(t), nodeKindName(n))
		}
		w.p.addAt(n.Line, path, "%s", msg)
	}
}

func typeName(t reflect.Type) string {
	if t == clientKeyType {
		return "key (a string) or a key object {name, key, weight, ...}"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int64:
		if t == reflect.TypeFor[Duration]() {
			return "duration such as 60s"
		}
		return "whole number"
	case reflect.Float64:
		return "number"
	case reflect.Bool:
		return "boolean (true or false)"
	case reflect.String:
		return "string"
	}
	return t.String()
}

// isKeyList reports whether path is a list of API keys (auth.api_keys, providers[0].keys, ...).
func isKeyList(path string) bool {
	return strings.HasSuffix(path, ".keys") || strings.HasSuffix(path, "_keys")
}

func joinPath(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

// yamlFields maps the yaml names of t's fields to the fields.
func yamlFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		out[name] = f
	}
	return out
}

// fieldNames lists t's yaml names in declaration order.
func fieldNames(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}
