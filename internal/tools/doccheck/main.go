// Command doccheck reports the doc comments of the library's packages that
// are hard to read: sentences over a number of words, and sentences that
// chain clauses with more than one colon or semicolon. It prints each with
// its place, then the counts: sentences, words and colons or semicolons per
// sentence. It exits 1 when it reported any.
//
//	go run ./internal/tools/doccheck [-words 25] [-colons 1] [dir...]
//
// The directories default to the library's packages under the current
// one (not internal, testdata, examples, bench, cmd, scripts). Code blocks
// and lists are left out: a list item counts as a sentence.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

func main() {
	maxWords := flag.Int("words", 25, "the most `words` a sentence may have")
	maxColons := flag.Int("colons", 1, "the most colons and semicolons a sentence may have")
	quiet := flag.Bool("q", false, "print the counts only")
	flag.Parse()
	dirs := flag.Args()
	if len(dirs) == 0 {
		dirs = libraryDirs(".")
	}
	var st stats
	for _, dir := range dirs {
		check(dir, *maxWords, *maxColons, *quiet, &st)
	}
	fmt.Printf("%d sentences in %d doc comments: %.1f words and %.2f colons or semicolons a sentence; %d over %d words, %d with more than %d colons or semicolons\n",
		st.sentences, st.comments, ratio(st.words, st.sentences), ratio(st.colons, st.sentences), st.long, *maxWords, st.chained, *maxColons)
	if st.long+st.chained > 0 {
		os.Exit(1)
	}
}

type stats struct {
	comments, sentences, words, colons, long, chained int
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// libraryDirs returns the directories of the library's packages under
// root.
func libraryDirs(root string) []string {
	skip := map[string]bool{"internal": true, "testdata": true, "examples": true, "bench": true, "cmd": true,
		"scripts": true, "node_modules": true, "model": true, "docs": true}
	var dirs []string
	filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if path != root && (skip[d.Name()] || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if matches, _ := filepath.Glob(filepath.Join(path, "*.go")); len(matches) > 0 {
			dirs = append(dirs, path)
		}
		return nil
	})
	return dirs
}

// check reports the doc comments of the package in dir.
func check(dir string, maxWords, maxColons int, quiet bool, st *stats) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go") && !strings.HasSuffix(fi.Name(), ".pb.go") && !strings.HasSuffix(fi.Name(), ".connect.go")
	}, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		fmt.Fprintln(os.Stderr, "doccheck:", err)
		os.Exit(2)
	}
	for _, pkg := range pkgs {
		if pkg.Name == "main" {
			continue
		}
		for _, f := range pkg.Files {
			for _, g := range docComments(f) {
				st.comments++
				for _, s := range sentences(g.Text()) {
					words := len(strings.Fields(s))
					colons := strings.Count(s, ":") + strings.Count(s, ";") - strings.Count(s, "://")
					st.sentences++
					st.words += words
					st.colons += colons
					var why []string
					if words > maxWords {
						st.long++
						why = append(why, fmt.Sprintf("%d words", words))
					}
					if colons > maxColons {
						st.chained++
						why = append(why, fmt.Sprintf("%d colons or semicolons", colons))
					}
					if len(why) > 0 && !quiet {
						fmt.Printf("%s: %s: %s\n", fset.Position(g.Pos()), strings.Join(why, ", "), s)
					}
				}
			}
		}
	}
}

// docComments returns the doc comments of f: the package's, and those of
// its exported declarations, their fields and their methods.
func docComments(f *ast.File) []*ast.CommentGroup {
	var out []*ast.CommentGroup
	add := func(g *ast.CommentGroup) {
		if g != nil {
			out = append(out, g)
		}
	}
	add(f.Doc)
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Name.IsExported() {
				add(d.Doc)
			}
		case *ast.GenDecl:
			exported := false
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() {
						exported = true
						add(s.Doc)
						ast.Inspect(s.Type, func(n ast.Node) bool {
							if f, ok := n.(*ast.Field); ok && len(f.Names) > 0 && f.Names[0].IsExported() {
								add(f.Doc)
							}
							return true
						})
					}
				case *ast.ValueSpec:
					if s.Names[0].IsExported() {
						exported = true
						add(s.Doc)
					}
				}
			}
			if exported && len(d.Specs) > 0 {
				add(d.Doc)
			}
		}
	}
	return out
}

var sentenceEnd = regexp.MustCompile(`([.!?])\s+`)

// sentences returns the sentences of a doc comment's text: its paragraphs
// and list items cut after each full stop, without code blocks.
func sentences(text string) []string {
	var p comment.Parser
	d := p.Parse(text)
	var out []string
	addText := func(txt []comment.Text) {
		var b strings.Builder
		plain(&b, txt)
		for _, s := range split(b.String()) {
			out = append(out, s)
		}
	}
	for _, blk := range d.Content {
		switch b := blk.(type) {
		case *comment.Paragraph:
			addText(b.Text)
		case *comment.Heading:
		case *comment.List:
			for _, item := range b.Items {
				for _, c := range item.Content {
					if para, ok := c.(*comment.Paragraph); ok {
						addText(para.Text)
					}
				}
			}
		}
	}
	return out
}

func plain(b *strings.Builder, txt []comment.Text) {
	for _, t := range txt {
		switch t := t.(type) {
		case comment.Plain:
			b.WriteString(string(t))
		case comment.Italic:
			b.WriteString(string(t))
		case *comment.Link:
			plain(b, t.Text)
		case *comment.DocLink:
			plain(b, t.Text)
		}
	}
}

// abbreviations end with a full stop that does not end a sentence.
var abbreviations = []string{"e.g.", "i.e.", "etc.", "vs.", "cf."}

func split(s string) []string {
	s = strings.Join(strings.Fields(s), " ")
	for i, a := range abbreviations {
		s = strings.ReplaceAll(s, a, fmt.Sprintf("\x00%d\x00", i))
	}
	var out []string
	for _, part := range sentenceEnd.Split(s, -1) {
		for i, a := range abbreviations {
			part = strings.ReplaceAll(part, fmt.Sprintf("\x00%d\x00", i), a)
		}
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
