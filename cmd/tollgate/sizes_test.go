package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The house limits (STYLE.md, issue 22's constraints): a production function a reader can
// hold, and an actor type whose method set is not the whole room.
const (
	maxFuncLines   = 60
	maxActorMethod = 35
)

// longFuncs are today's production functions over maxFuncLines, by "package dir: name" with
// their length. They may only shrink: TestSizes fails when a function not listed here is over
// the limit, when a listed one has grown, and when a listed one is back within it (then its row
// goes), so the list stays exactly the debt that is left.
var longFuncs = map[string]int{}

// bigActorTypes are today's types under actors/ with more than maxActorMethod methods, by
// "package dir: type" with their count; they may only shrink, as longFuncs.
var bigActorTypes = map[string]int{}

// TestSizes holds the module's production code to the function-length and method-count
// limits, with the offenders that are left listed exactly.
func TestSizes(t *testing.T) {
	funcs, methods := measureModule(t, filepath.Join("..", ".."))
	checkLimit(t, "function", "lines", maxFuncLines, funcs, longFuncs)
	actorMethods := map[string]int{}
	for typ, n := range methods {
		if dir, _, _ := strings.Cut(typ, ": "); dir == "actors" || strings.HasPrefix(dir, "actors/") {
			actorMethods[typ] = n
		}
	}
	checkLimit(t, "actor type", "methods", maxActorMethod, actorMethods, bigActorTypes)
}

// checkLimit compares measured sizes with the limit and the list of known offenders.
func checkLimit(t *testing.T, what, unit string, limit int, got, known map[string]int) {
	t.Helper()
	for _, name := range slices.Sorted(maps.Keys(got)) {
		n := got[name]
		if n <= limit {
			continue
		}
		was, listed := known[name]
		switch {
		case !listed:
			t.Errorf("%s %s has %d %s, over the limit of %d: split it (the list of known offenders only shrinks)", what, name, n, unit, limit)
		case n > was:
			t.Errorf("%s %s has grown to %d %s (listed at %d, limit %d): split it rather than raise its row", what, name, n, unit, was, limit)
		case n < was:
			t.Errorf("%s %s has shrunk to %d %s (listed at %d): lower its row in sizes_test.go so the list stays exact", what, name, n, unit, was)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(known)) {
		if n, ok := got[name]; !ok || n <= limit {
			t.Errorf("%s %s is listed as over the limit of %d %s but is now within it (or gone): delete its row in sizes_test.go", what, name, limit, unit)
		}
	}
}

// measureModule parses every production Go file under root (not _test.go, not generated, not
// under testdata or a hidden or node_modules folder) and returns each function's length in
// lines and each type's method count, keyed "package dir: Recv.name" and "package dir: Type".
func measureModule(t *testing.T, root string) (funcs, methods map[string]int) {
	t.Helper()
	funcs, methods = map[string]int{}, map[string]int{}
	methodSets := map[string]map[string]bool{} // a method defined under two build tags counts once
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(rel)
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			lines := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			name := fd.Name.Name
			if recv := receiverType(fd); recv != "" {
				name = recv + "." + name
				typ := dir + ": " + recv
				if methodSets[typ] == nil {
					methodSets[typ] = map[string]bool{}
				}
				methodSets[typ][fd.Name.Name] = true
			}
			key := dir + ": " + name
			if _, dup := funcs[key]; dup {
				// init and a function under two build tags share a key; keep the longest.
				lines = max(lines, funcs[key])
			}
			funcs[key] = lines
		}
		return nil
	})
	if err != nil {
		t.Fatalf("measuring the module: %v", err)
	}
	for typ, set := range methodSets {
		methods[typ] = len(set)
	}
	return funcs, methods
}

// receiverType names a method's receiver type without pointer or type parameters, or "" for a
// plain function.
func receiverType(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return ""
	}
	x := fd.Recv.List[0].Type
	for {
		switch e := x.(type) {
		case *ast.StarExpr:
			x = e.X
		case *ast.IndexExpr:
			x = e.X
		case *ast.IndexListExpr:
			x = e.X
		case *ast.ParenExpr:
			x = e.X
		case *ast.Ident:
			return e.Name
		default:
			panic(fmt.Sprintf("unexpected receiver %T", e))
		}
	}
}
