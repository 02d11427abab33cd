package policy

import (
	"go/build"
	"strings"
	"testing"
)

// TestImports keeps the policy pure: the standard library, the shared vocabulary and its own
// pure rules (keys, tokens, ...), never actors, protoactor or any adapter.
func TestImports(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatalf("reading the package: %v", err)
	}
	for _, imp := range append(pkg.Imports, pkg.TestImports...) {
		first, _, _ := strings.Cut(imp, "/")
		if !strings.Contains(first, ".") || imp == "github.com/tollgate/tollgate/providers/llm" ||
			strings.HasPrefix(imp, "github.com/tollgate/tollgate/actors/policy/") {
			continue
		}
		t.Errorf("actors/policy imports %s: only the standard library, providers/llm and actors/policy/... are allowed", imp)
	}
}
