package main

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/text"
)

// module is the module path; rules and graphs name packages relative to it.
const module = "github.com/tollgate/tollgate/"

// adapters are the backend adapter packages, which only the wiring may import.
var adapters = []string{module + "providers/openai", module + "providers/anthropic", module + "providers/gemini",
	module + "providers/cli", module + "providers/fake"}

// layerRule is one arrow of the architecture (STYLE.md, docs/architecture.md "The parts").
type layerRule struct {
	pkg    string   // a package (and its subpackages), or a prefix ending in "/"
	forbid []string // import prefixes it must not have (absolute)
	except []string // module packages the forbid prefixes do not cover
	only   []string // if not nil: the only module packages it may import, besides its own subpackages
}

// layerRules keep the arrows pointing one way: cmd → httpapi, actors, providers/*; httpapi →
// providers/llm, providers/sse, providers/route; actors → actors/policy, actors/replicas,
// providers/llm, providers/route; providers/* → providers/llm and each other, never the gateway's serving or
// actor code. providers/route (the SPEC §12 matcher: a request and its X-Gateway-Task header
// in, a model id out) is open to both sides so whichever resolves a route can, without either
// importing the other. Under cmd/internal only app wires the parts together: the others import
// no other cmd/internal package, and nothing but the commands imports app.
var layerRules = []layerRule{
	{pkg: "providers/", forbid: []string{module + "actors", module + "httpapi", module + "cmd", "github.com/asynkron/protoactor-go"}},
	{pkg: "providers/llm", only: []string{}},
	{pkg: "httpapi", forbid: []string{"github.com/asynkron/protoactor-go"},
		only: []string{"providers/llm", "providers/sse", "providers/route", "providers/wirejson"}},
	{pkg: "actors/policy", only: []string{"providers/llm"}},
	// actors/replicas is the contract between the actors and the replicas' shared state:
	// standard library only, so cmd/internal/cluster implements it without importing actors.
	{pkg: "actors/replicas", only: []string{}},
	// A provider's health composes the pure rules beside it (keys, breaker, retry, learned
	// lanes) and nothing else.
	{pkg: "actors/policy/health", only: []string{"actors/policy/breaker", "actors/policy/capacity",
		"actors/policy/keys", "actors/policy/retry", "providers/llm"}},
	{pkg: "actors", only: []string{"actors/policy", "actors/replicas", "providers/llm", "providers/route"}},
	{pkg: "cmd/internal/", forbid: []string{module + "cmd/internal/app"}},
	// httpapi/guard parses the allowed hosts and origins with the standard library only, so
	// config refuses a bad entry exactly as the check would read it.
	{pkg: "httpapi/guard", only: []string{}},
	{pkg: "cmd/internal/statuswriter", only: []string{}},
	{pkg: "cmd/internal/config", forbid: []string{module + "actors", module + "httpapi", module + "cmd/"},
		except: []string{"httpapi/guard"}},
	{pkg: "cmd/internal/serve", only: []string{}},
	// cmd/internal/cluster implements actors/replicas without the actor system.
	{pkg: "cmd/internal/cluster", forbid: append([]string{module + "httpapi", module + "cmd/", module + "actors"}, adapters...),
		except: []string{"actors/policy/tokens", "actors/replicas"}},
	{pkg: "cmd/internal/telemetry", forbid: append([]string{module + "cmd/"}, adapters...)},
	{pkg: "cmd/internal/fakellm", forbid: []string{module + "actors", module + "httpapi", module + "cmd/"}},
	// The store implements httpapi.Tenants in httpapi's vocabulary; it knows nothing of actors.
	{pkg: "cmd/internal/store", forbid: append([]string{module + "actors", module + "cmd/"}, adapters...),
		except: []string{"cmd/internal/store/pgtest"}},
}

// covers reports whether rule r applies to module package rel.
func (r layerRule) covers(rel string) bool {
	if strings.HasSuffix(r.pkg, "/") {
		return strings.HasPrefix(rel, r.pkg)
	}
	return rel == r.pkg || strings.HasPrefix(rel, r.pkg+"/")
}

// onlyRule is the most specific rule with an only list that covers rel, or nil.
func onlyRule(rel string) *layerRule {
	var best *layerRule
	for i := range layerRules {
		r := &layerRules[i]
		if r.only != nil && r.covers(rel) && (best == nil || len(r.pkg) > len(best.pkg)) {
			best = r
		}
	}
	return best
}

// layerViolations lists every import in graph (module-relative package → absolute imports)
// that breaks a rule. An import of a package's own subpackage is always allowed.
func layerViolations(graph map[string][]string) []string {
	var bad []string
	for rel, imports := range graph {
		only := onlyRule(rel)
		for _, imp := range imports {
			irel, inModule := strings.CutPrefix(imp, module)
			if inModule && strings.HasPrefix(irel, rel+"/") {
				continue
			}
			for _, r := range layerRules {
				for _, f := range r.forbid {
					if r.covers(rel) && strings.HasPrefix(imp, f) && !(inModule && slices.Contains(r.except, irel)) {
						bad = append(bad, rel+" imports "+imp+": forbidden")
					}
				}
			}
			switch {
			case only == nil:
			case inModule && !slices.Contains(only.only, irel):
				bad = append(bad, rel+" imports "+irel+": only "+strings.Join(only.only, ", ")+" are allowed")
			case !inModule && rel == "providers/llm" && isLibrary(imp):
				bad = append(bad, rel+" imports "+imp+": the shared vocabulary uses the standard library only")
			}
		}
	}
	slices.Sort(bad)
	return bad
}

// isLibrary reports whether import path imp is outside the standard library and the module.
func isLibrary(imp string) bool {
	return !strings.HasPrefix(imp, module) && strings.Contains(strings.Split(imp, "/")[0], ".")
}

// moduleGraph is every module package's imports, as go list reports them (production files
// only, default build tags).
func moduleGraph(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}:{{join .Imports " "}}`, "./...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	graph := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, imports, _ := strings.Cut(line, ":")
		if rel, ok := strings.CutPrefix(path, module); ok {
			graph[rel] = strings.Fields(imports)
		}
	}
	if len(graph) < 20 {
		t.Fatalf("go list found only %d packages: the listing is wrong", len(graph))
	}
	return graph
}

// TestDependencyDirection holds every package of the module to layerRules.
func TestDependencyDirection(t *testing.T) {
	for _, v := range layerViolations(moduleGraph(t)) {
		t.Error(v)
	}
}

// TestLayerRules shows each kind of rule catching the edge it is there for, and letting
// through what the architecture allows.
func TestLayerRules(t *testing.T) {
	tests := []struct {
		pkg, imp string
		bad      bool
	}{
		{"providers/openai", module + "actors", true},
		{"providers/openai", module + "providers/upstream", false},
		{"providers/llm", "github.com/rs/zerolog", true},
		{"httpapi", module + "actors", true},
		{"httpapi", module + "httpapi/ui", false},
		{"actors", module + "providers/openai", true},
		{"actors", module + "actors/policy/keys", false},
		{"actors/policy", module + "actors", true},
		{"actors/replicas", module + "actors/policy/tokens", true},
		{"actors/replicas", module + "providers/llm", true},
		{"actors", module + "actors/replicas", false},
		{"cmd/internal/cluster", module + "actors/replicas", false},
		{"cmd/internal/cluster", module + "actors", true},
		{"cmd/internal/config", module + "actors", true},
		{"cmd/internal/config", module + "cmd/internal/serve", true},
		{"cmd/internal/config", module + "providers/route", false},
		{"cmd/internal/serve", module + "providers/llm", true},
		{"cmd/internal/serve", "github.com/rs/zerolog", false},
		{"cmd/internal/cluster", module + "providers/openai", true},
		{"cmd/internal/cluster", module + "cmd/internal/config", true},
		{"cmd/internal/cluster", module + "cmd/internal/cluster/redistest", false},
		{"cmd/internal/telemetry", module + "cmd/internal/app", true},
		{"cmd/internal/telemetry", module + "httpapi", false},
		{"cmd/internal/fakellm", module + "httpapi", true},
		{"cmd/internal/app", module + "cmd/internal/config", false},
		{"cmd/internal/app", module + "providers/openai", false},
		{"cmd/tollgate", module + "cmd/internal/app", false},
	}
	for _, tt := range tests {
		got := layerViolations(map[string][]string{tt.pkg: {tt.imp}})
		if (len(got) > 0) != tt.bad {
			t.Errorf("%s importing %s: violations %q, want bad=%v", tt.pkg, tt.imp, got, tt.bad)
		}
	}
}

// partsRow is one row of docs/architecture.md's parts table.
type partsRow struct {
	pkgs, imports, libraries []string
}

// partsTable reads the table under docs/architecture.md's "The parts": each cell's code
// spans, with a package written as a/{b,c} standing for a/b and a/c.
func partsTable(t *testing.T) []partsRow {
	t.Helper()
	src, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	md := goldmark.New(goldmark.WithExtensions(extension.Table))
	root := md.Parser().Parse(text.NewReader(src))
	var rows []partsRow
	inParts := false
	for n := root.FirstChild(); n != nil; n = n.NextSibling() {
		if h, ok := n.(*ast.Heading); ok {
			inParts = h.Level == 2 && plainText(h, src) == "The parts"
			continue
		}
		table, ok := n.(*east.Table)
		if !inParts || !ok {
			continue
		}
		for r := table.FirstChild(); r != nil; r = r.NextSibling() {
			if _, header := r.(*east.TableHeader); header {
				continue
			}
			var cells [][]string
			for c := r.FirstChild(); c != nil; c = c.NextSibling() {
				cells = append(cells, codeSpans(c, src))
			}
			if len(cells) != 4 {
				t.Fatalf("docs/architecture.md: a parts row has %d cells, want 4 (package, owns, imports, libraries)", len(cells))
			}
			var pkgs []string
			for _, p := range cells[0] {
				pkgs = append(pkgs, expandBraces(p)...)
			}
			rows = append(rows, partsRow{pkgs: pkgs, imports: cells[2], libraries: cells[3]})
		}
	}
	if len(rows) == 0 {
		t.Fatal(`docs/architecture.md: no table under "## The parts"`)
	}
	return rows
}

// codeSpans is the text of each code span in n.
func codeSpans(n ast.Node, src []byte) []string {
	var spans []string
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if cs, ok := c.(*ast.CodeSpan); ok && entering {
			spans = append(spans, plainText(cs, src))
			return ast.WalkSkipChildren, nil
		}
		return ast.WalkContinue, nil
	})
	return spans
}

// expandBraces turns "a/{b,c}" into "a/b", "a/c"; a name without braces is itself.
func expandBraces(s string) []string {
	pre, rest, ok := strings.Cut(s, "{")
	alts, post, closed := strings.Cut(rest, "}")
	if !ok || !closed {
		return []string{s}
	}
	var out []string
	for _, a := range strings.Split(alts, ",") {
		out = append(out, pre+a+post)
	}
	return out
}

// libraryMatches reports whether import path imp is the library a parts table names lib:
// one of its path elements is lib (zerolog, otel, protoactor-go, ...).
func libraryMatches(imp, lib string) bool {
	return slices.Contains(strings.Split(imp, "/"), lib)
}

// TestPartsTable holds docs/architecture.md's parts table to the code and to layerRules:
// every module package has one row, its imports in the module are exactly those the row
// lists, every library it imports is named and every library named is imported, and the
// table's own arrows break no rule.
func TestPartsTable(t *testing.T) {
	graph := moduleGraph(t)
	tableGraph := map[string][]string{}
	for _, row := range partsTable(t) {
		for _, pkg := range row.pkgs {
			imports, ok := graph[pkg]
			if !ok {
				t.Errorf("parts table: %s is not a package of the module", pkg)
				continue
			}
			if _, dup := tableGraph[pkg]; dup {
				t.Errorf("parts table: %s has two rows", pkg)
			}
			tableGraph[pkg] = checkPartsRow(t, pkg, imports, row)
		}
	}
	for pkg := range graph {
		if _, ok := tableGraph[pkg]; !ok {
			t.Errorf("parts table: %s has no row", pkg)
		}
	}
	for _, v := range layerViolations(tableGraph) {
		t.Errorf("parts table: %s", v)
	}
}

// checkPartsRow compares package pkg's imports with its row and returns the imports the row
// states (its module packages, and the library imports it names).
func checkPartsRow(t *testing.T, pkg string, imports []string, row partsRow) []string {
	t.Helper()
	var inModule, stated []string
	for _, imp := range imports {
		if rel, ok := strings.CutPrefix(imp, module); ok {
			inModule = append(inModule, rel)
			continue
		}
		if !isLibrary(imp) {
			continue
		}
		named := slices.ContainsFunc(row.libraries, func(lib string) bool { return libraryMatches(imp, lib) })
		if !named {
			t.Errorf("parts table: %s imports %s, which its row's libraries %q do not name", pkg, imp, row.libraries)
		}
		stated = append(stated, imp)
	}
	for _, lib := range row.libraries {
		if !slices.ContainsFunc(imports, func(imp string) bool { return libraryMatches(imp, lib) }) {
			t.Errorf("parts table: %s's row names the library %s, which it does not import", pkg, lib)
		}
	}
	want := slices.Sorted(slices.Values(row.imports))
	slices.Sort(inModule)
	if !slices.Equal(inModule, want) {
		t.Errorf("parts table: %s imports %q in the module, its row says %q", pkg, inModule, want)
	}
	for _, rel := range row.imports {
		stated = append(stated, module+rel)
	}
	return stated
}
