package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse: Parse never panics, returns exactly one of a config or an error, a config it
// returns validates, and no error or summary shows a secret from the environment.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(testdataDir, "*.yaml"))
	invalid, _ := filepath.Glob(filepath.Join(testdataDir, "invalid", "*.yaml"))
	for _, file := range append(files, invalid...) {
		if data, err := os.ReadFile(file); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte("providers: [{name: a, kind: fake, models: [{id: m, <<: {fallbacks: [x]}}]}]"))
	f.Add([]byte("a: &x {b: *x}"))
	f.Add([]byte(clientKeysYAML))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse("f.yaml", data, testEnv)
		if (cfg == nil) == (err == nil) {
			t.Fatalf("cfg %v, err %v: want exactly one", cfg, err)
		}
		if err != nil {
			// Only values from the environment: the fuzzer may move a literal key into a
			// mapping key or name, where it is no longer a key.
			assertNone(t, err.Error(), envSecrets...)
			if !strings.HasPrefix(err.Error(), "f.yaml") {
				t.Errorf("error does not name the file: %v", err)
			}
			return
		}
		if verr := cfg.Validate(); verr != nil {
			t.Errorf("Parse accepted a config Validate rejects: %v", verr)
		}
		assertNone(t, strings.Join(cfg.Summary(), "\n"), envSecrets...)
	})
}

// FuzzExpand: expansion never panics and text without "${" passes through unchanged.
func FuzzExpand(f *testing.F) {
	for _, s := range []string{"a: ${A}", "$${A}", "# ${X}\n'${A}'", "${A:-x}", "${", "\"\\\"${A}\""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out, _, errs := expand("f.yaml", []byte(s), testEnv)
		if !strings.Contains(s, "${") && (string(out) != s || len(errs) > 0) {
			t.Errorf("text without placeholders changed: %q → %q (%v)", s, out, errs)
		}
	})
}
