package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// specMapHeading opens docs/architecture.md's table of which file implements each SPEC
// section.
const specMapHeading = "## Where each SPEC rule lives"

// specSections is how many sections of SPEC.md the table must have a row for; later ones
// join it as they are built.
const specSections = 17

// TestSpecMap holds docs/architecture.md's SPEC map to the tree: one row per section, in
// order, from §1 to at least specSections, and every path it names (in backticks) exists.
func TestSpecMap(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n"+specMapHeading+"\n")
	if !ok {
		t.Fatalf("docs/architecture.md has no %q section", specMapHeading)
	}
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	row := regexp.MustCompile(`^\| §(\d+) `)
	path := regexp.MustCompile("`([^`]+)`")
	last, paths := 0, 0
	for line := range strings.SplitSeq(section, "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		if n != last+1 {
			t.Errorf("SPEC map: row §%d follows §%d; want one row per section, in order", n, last)
		}
		last = n
		for _, p := range path.FindAllStringSubmatch(line, -1) {
			name := p[1]
			if !strings.Contains(name, "/") {
				continue // a name in the text, not a path
			}
			paths++
			if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(name))); err != nil {
				t.Errorf("SPEC map: §%d names %s, which is not in the tree", n, name)
			}
		}
	}
	if last < specSections {
		t.Errorf("SPEC map: rows end at §%d; want every section up to §%d", last, specSections)
	}
	if paths == 0 {
		t.Error("SPEC map: no paths found; the table's format changed?")
	}
}
