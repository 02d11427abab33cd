package main

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/text"
)

// readmeMaxLines is how long the README may grow: it is the front door (what Tollgate is, how
// to run and test it, one call, one picture, links), and the reference lives in docs/.
const readmeMaxLines = 160

// mdDoc is what the link check needs of one Markdown file: its relative links and the
// anchors its headings make.
type mdDoc struct {
	links   []string
	anchors map[string]bool
}

// parseMarkdown reads a Markdown file with a CommonMark parser, so links inside code spans
// and fenced blocks are not taken for links.
func parseMarkdown(t *testing.T, path string) mdDoc {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	d := mdDoc{anchors: map[string]bool{}}
	seen := map[string]int{}
	root := goldmark.New().Parser().Parse(text.NewReader(src))
	err = ast.Walk(root, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.Link:
			d.links = append(d.links, string(n.Destination))
		case *ast.Image:
			d.links = append(d.links, string(n.Destination))
		case *ast.Heading:
			slug := headingSlug(plainText(n, src))
			if k := seen[slug]; k > 0 {
				d.anchors[fmt.Sprintf("%s-%d", slug, k)] = true
			} else {
				d.anchors[slug] = true
			}
			seen[slug]++
		}
		return ast.WalkContinue, nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", path, err)
	}
	return d
}

// plainText is a node's text as a reader sees it: code spans without their backticks.
func plainText(n ast.Node, src []byte) string {
	var b bytes.Buffer
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		switch c := c.(type) {
		case *ast.Text:
			if entering {
				b.Write(c.Segment.Value(src))
				if c.SoftLineBreak() || c.HardLineBreak() {
					b.WriteByte(' ')
				}
			}
		case *ast.String:
			if entering {
				b.Write(c.Value)
			}
		}
		return ast.WalkContinue, nil
	})
	return b.String()
}

// headingSlug is the anchor GitHub gives a heading: lower case, letters, digits, '_' and '-'
// kept, each space a '-', every other character dropped.
func headingSlug(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(s)) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r) || r == '_' || r == '-':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// TestDocsLinks holds README.md and docs/*.md to their links: every relative link names a
// file that exists, and every #anchor a heading of the Markdown file it points into. The
// README stays a front door of at most readmeMaxLines lines.
func TestDocsLinks(t *testing.T) {
	root := filepath.Join("..", "..")
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no docs/*.md found (%v)", err)
	}
	files = append([]string{filepath.Join(root, "README.md")}, files...)
	docs := map[string]mdDoc{}
	doc := func(path string) mdDoc {
		if d, ok := docs[path]; ok {
			return d
		}
		docs[path] = parseMarkdown(t, path)
		return docs[path]
	}
	for _, f := range files {
		for _, link := range doc(f).links {
			if problem := checkLink(f, link, doc); problem != "" {
				rel, _ := filepath.Rel(root, f)
				t.Errorf("%s: link %q: %s", rel, link, problem)
			}
		}
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(readme, []byte("\n")); n > readmeMaxLines {
		t.Errorf("README.md has %d lines, more than %d: move reference text to a docs/ page", n, readmeMaxLines)
	}
}

// checkLink says what is wrong with link, found in file from, or "" when nothing is. Links
// with a scheme (https:, mailto:) are not checked.
func checkLink(from, link string, doc func(string) mdDoc) string {
	u, err := url.Parse(link)
	switch {
	case err != nil:
		return err.Error()
	case u.Scheme != "" || u.Host != "":
		return ""
	}
	target := from
	if u.Path != "" {
		target = filepath.Join(filepath.Dir(from), filepath.FromSlash(u.Path))
		if _, err := os.Stat(target); err != nil {
			return "no such file"
		}
	}
	if u.Fragment == "" {
		return ""
	}
	if !strings.HasSuffix(target, ".md") {
		return "an anchor into a file that is not Markdown"
	}
	if !doc(target).anchors[u.Fragment] {
		return fmt.Sprintf("no heading makes the anchor #%s", u.Fragment)
	}
	return ""
}
