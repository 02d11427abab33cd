package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencyDirection keeps the architecture's arrows pointing one way (STYLE.md):
// cmd → httpapi, actors, providers/*; httpapi → providers/llm, providers/sse,
// providers/route, providers/wirejson (the one JSON reader on a call's path); actors → actors/policy, providers/llm, providers/route; providers/* →
// providers/llm and each other, never the gateway's serving or actor code. providers/route (the
// SPEC §12 matcher: a request and its X-Gateway-Task header in, a model id out) is open to
// both sides so whichever resolves a route can, without either importing the other.
func TestDependencyDirection(t *testing.T) {
	const mod = "github.com/tollgate/tollgate/"
	out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}:{{join .Imports " "}}`,
		"../../actors/...", "../../httpapi/...", "../../providers/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	rules := []struct {
		pkg    string   // a package prefix within the module
		forbid []string // import prefixes it must not have (module-relative or absolute)
		only   []string // if set: the only module packages it may import
	}{
		{pkg: "providers/", forbid: []string{mod + "actors", mod + "httpapi", mod + "cmd", "github.com/asynkron/protoactor-go"}},
		{pkg: "providers/llm", only: []string{}},
		{pkg: "httpapi", forbid: []string{"github.com/asynkron/protoactor-go"},
			only: []string{"providers/llm", "providers/sse", "providers/route", "providers/wirejson"}},
		{pkg: "actors/policy", only: []string{"providers/llm"}},
		{pkg: "actors", only: []string{"actors/policy", "providers/llm", "providers/route"}},
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, imports, _ := strings.Cut(line, ":")
		rel, ok := strings.CutPrefix(path, mod)
		if !ok {
			continue
		}
		for _, r := range rules {
			if rel != r.pkg && !strings.HasPrefix(rel, r.pkg+"/") && !(strings.HasSuffix(r.pkg, "/") && strings.HasPrefix(rel, r.pkg)) {
				continue
			}
			if r.pkg == "actors" && strings.HasPrefix(rel, "actors/policy") {
				continue // its own rule
			}
			checked++
			for _, imp := range strings.Fields(imports) {
				for _, f := range r.forbid {
					if strings.HasPrefix(imp, f) {
						t.Errorf("%s imports %s: forbidden", rel, imp)
					}
				}
				if r.only == nil {
					continue
				}
				if irel, inMod := strings.CutPrefix(imp, mod); inMod {
					allowed := false
					for _, o := range r.only {
						allowed = allowed || irel == o || strings.HasPrefix(irel, rel+"/")
					}
					if !allowed {
						t.Errorf("%s imports %s: only %v are allowed", rel, irel, r.only)
					}
				} else if r.pkg == "providers/llm" && strings.Contains(strings.Split(imp, "/")[0], ".") {
					t.Errorf("%s imports %s: the shared vocabulary uses the standard library only", rel, imp)
				}
			}
		}
	}
	if checked < 10 {
		t.Fatalf("checked only %d packages: the listing is wrong", checked)
	}
}
